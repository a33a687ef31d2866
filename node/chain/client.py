"""A thin, synchronous view of one chain: the USDC token, the settler and our sender.

web3's AsyncWeb3 does not run under trio, so this is sync web3 and trio code calls it
through ``trio.to_thread.run_sync``. Every RPC goes through :meth:`ChainClient._rpc`,
which turns "cannot reach the node" into :class:`ChainUnavailable`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import requests
from eth_abi import decode, encode
from eth_account.signers.local import LocalAccount
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import ProviderConnectionError, TimeExhausted, TransactionNotFound
from web3.middleware import ExtraDataToPOAMiddleware
from web3.types import TxReceipt

from node.chain.authorization import Authorization
from node.chain.errors import ChainUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

_CONNECTION_ERRORS = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    ProviderConnectionError,
    ConnectionError,
    OSError,
)

SELECTOR_BALANCE_OF = function_signature_to_4byte_selector("balanceOf(address)")
SELECTOR_AUTHORIZATION_STATE = function_signature_to_4byte_selector("authorizationState(address,bytes32)")
SELECTOR_TRANSFER_WITH_AUTHORIZATION = function_signature_to_4byte_selector(
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
)
SELECTOR_SETTLE = function_signature_to_4byte_selector(
    "settle(address,(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)[])"
)
TOPIC_TRANSFER = Web3.keccak(text="Transfer(address,address,uint256)")
TOPIC_AUTHORIZATION_USED = Web3.keccak(text="AuthorizationUsed(address,bytes32)")
TOPIC_AUTHORIZATION_CANCELED = Web3.keccak(text="AuthorizationCanceled(address,bytes32)")
TOPIC_ITEM_FAILED = Web3.keccak(text="ItemFailed(uint256,bytes)")

# Gas limits are fixed rather than estimated: eth_estimateGas under-estimates a batch
# whose items catch their own out-of-gas. Unused gas is not charged.
GAS_SINGLE = 120_000
GAS_BATCH_BASE = 60_000
GAS_BATCH_PER_ITEM = 70_000


def connect_web3(rpc_url: str, timeout_s: float = 10.0) -> Web3:
    w3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout_s}))
    w3.middleware_onion.inject(ExtraDataToPOAMiddleware, layer=0)
    return w3


def encode_transfer_with_authorization(authorization: Authorization) -> bytes:
    return SELECTOR_TRANSFER_WITH_AUTHORIZATION + encode(
        ["address", "address", "uint256", "uint256", "uint256", "bytes32", "uint8", "bytes32", "bytes32"],
        _authorization_tuple(authorization),
    )


def encode_settle(token_address: str, authorizations: Sequence[Authorization]) -> bytes:
    return SELECTOR_SETTLE + encode(
        ["address", "(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)[]"],
        [token_address, [_authorization_tuple(item) for item in authorizations]],
    )


def _authorization_tuple(authorization: Authorization) -> tuple[Any, ...]:
    return (
        authorization.from_address,
        authorization.to,
        authorization.value_micro,
        authorization.valid_after_s,
        authorization.valid_before_s,
        authorization.nonce,
        authorization.v,
        authorization.r,
        authorization.s,
    )


def topic_address(topic: bytes) -> str:
    return to_checksum_address(bytes(topic)[-20:])


def decode_revert_reason(data: bytes) -> str:
    """Error(string) → its text; anything else → hex."""
    if data[:4] == bytes.fromhex("08c379a0"):
        try:
            return str(decode(["string"], data[4:])[0])
        except Exception:
            pass
    return "0x" + data.hex() if data else "reverted"


class ChainClient:
    """Reads the token and sends transactions from one local account."""

    def __init__(
        self,
        w3: Web3,
        token_address: str,
        settler_address: str | None = None,
        *,
        expected_chain_id: int | None = None,
    ) -> None:
        self.w3 = w3
        self.token_address = to_checksum_address(token_address)
        self.settler_address = to_checksum_address(settler_address) if settler_address else None
        self._expected_chain_id = expected_chain_id
        self._chain_id: int | None = None
        self._nonce_lock = threading.Lock()
        self._next_nonce: dict[str, int] = {}
        self._fees: tuple[float, dict[str, int]] | None = None

    @classmethod
    def connect(
        cls,
        rpc_url: str,
        token_address: str,
        settler_address: str | None = None,
        *,
        expected_chain_id: int | None = None,
        timeout_s: float = 10.0,
    ) -> ChainClient:
        return cls(
            connect_web3(rpc_url, timeout_s),
            token_address,
            settler_address,
            expected_chain_id=expected_chain_id,
        )

    def _rpc(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except _CONNECTION_ERRORS as exc:
            raise ChainUnavailable(f"cannot reach the chain RPC: {exc}") from exc

    # --- reads ------------------------------------------------------------------------
    @property
    def chain_id(self) -> int:
        if self._chain_id is None:
            chain_id = self._rpc(lambda: self.w3.eth.chain_id)
            if self._expected_chain_id is not None and chain_id != self._expected_chain_id:
                raise ChainUnavailable(
                    f"RPC serves chain {chain_id}, configured for {self._expected_chain_id}"
                )
            self._chain_id = chain_id
        return self._chain_id

    def _call(self, to: str, data: bytes) -> bytes:
        return bytes(self._rpc(lambda: self.w3.eth.call({"to": to, "data": HexBytes(data)})))

    def authorization_state(self, authorizer: str, nonce: bytes) -> bool:
        data = SELECTOR_AUTHORIZATION_STATE + encode(["address", "bytes32"], [authorizer, nonce])
        return bool(int.from_bytes(self._call(self.token_address, data), "big"))

    def usdc_balance(self, address: str) -> int:
        data = SELECTOR_BALANCE_OF + encode(["address"], [address])
        return int.from_bytes(self._call(self.token_address, data), "big")

    def eth_balance(self, address: str) -> int:
        return int(self._rpc(lambda: self.w3.eth.get_balance(to_checksum_address(address))))

    def receipt(self, tx_hash: str) -> TxReceipt | None:
        def fetch() -> TxReceipt | None:
            try:
                return self.w3.eth.get_transaction_receipt(HexBytes(tx_hash))
            except TransactionNotFound:
                return None

        return self._rpc(fetch)

    def wait_receipt(self, tx_hash: str, timeout_s: float = 120.0) -> TxReceipt:
        deadline = time.monotonic() + timeout_s
        delay = 0.005
        while True:
            receipt = self.receipt(tx_hash)
            if receipt is not None:
                return receipt
            if time.monotonic() > deadline:
                raise TimeExhausted(f"no receipt for {tx_hash} after {timeout_s} s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def authorization_events(self, authorizer: str, nonce: bytes) -> list[dict[str, Any]]:
        """AuthorizationUsed / AuthorizationCanceled logs for (authorizer, nonce)."""
        topics: list[Any] = [
            [TOPIC_AUTHORIZATION_USED.to_0x_hex(), TOPIC_AUTHORIZATION_CANCELED.to_0x_hex()],
            "0x" + bytes(12).hex() + authorizer[2:].lower(),
            "0x" + nonce.hex(),
        ]
        logs = self._rpc(
            lambda: self.w3.eth.get_logs(
                {"address": self.token_address, "fromBlock": 0, "toBlock": "latest", "topics": topics}
            )
        )
        return [dict(entry) for entry in logs]

    # --- writes -----------------------------------------------------------------------
    def fee_fields(self) -> dict[str, int]:
        """EIP-1559 fees: the node's suggested tip and head-room for the base fee to double.

        Paying the tip as suggested (not a multiple of eth_gasPrice) matters: anvil
        derives its suggestion from recent tips, so over-paying feeds back into it.
        Cached for 2 s, since every settlement transaction needs them.
        """
        cached = self._fees
        if cached is not None and time.monotonic() - cached[0] < 2.0:
            return cached[1]
        block = self._rpc(lambda: self.w3.eth.get_block("latest"))
        base_fee = block.get("baseFeePerGas")
        if base_fee is None:
            fees = {"gasPrice": int(self._rpc(lambda: self.w3.eth.gas_price))}
        else:
            tip = int(self._rpc(lambda: self.w3.eth.max_priority_fee))
            fees = {"maxFeePerGas": 2 * int(base_fee) + tip, "maxPriorityFeePerGas": tip}
        self._fees = (time.monotonic(), fees)
        return fees

    def sign_transaction(
        self, account: LocalAccount, to: str, data: bytes, gas: int, value_wei: int = 0
    ) -> tuple[str, bytes]:
        """Sign with the next local nonce. Returns (tx hash, raw) before anything is sent,
        so the caller can record the hash first."""
        chain_id = self.chain_id
        fees = self.fee_fields()
        with self._nonce_lock:
            nonce = self._next_nonce.get(account.address)
            if nonce is None:
                nonce = int(
                    self._rpc(lambda: self.w3.eth.get_transaction_count(account.address, "pending"))
                )
            self._next_nonce[account.address] = nonce + 1
        signed = account.sign_transaction(
            {
                "to": to_checksum_address(to),
                "data": HexBytes(data),
                "value": value_wei,
                "gas": gas,
                **fees,
                "nonce": nonce,
                "chainId": chain_id,
            }
        )
        return signed.hash.to_0x_hex(), bytes(signed.raw_transaction)

    def broadcast(self, raw_transaction: bytes, sender: str) -> None:
        try:
            self._rpc(lambda: self.w3.eth.send_raw_transaction(raw_transaction))
        except Exception:
            # The local nonce may now be ahead of or behind the node's; re-read it next time.
            with self._nonce_lock:
                self._next_nonce.pop(sender, None)
            raise

    def send(self, account: LocalAccount, to: str, data: bytes, gas: int, value_wei: int = 0) -> str:
        tx_hash, raw = self.sign_transaction(account, to, data, gas, value_wei)
        self.broadcast(raw, account.address)
        return tx_hash

    def transfer_events(self, receipt: TxReceipt) -> list[tuple[str, str, int]]:
        """(from, to, value) of every token Transfer in ``receipt``."""
        transfers = []
        for entry in receipt["logs"]:
            topics = entry["topics"]
            if (
                to_checksum_address(entry["address"]) == self.token_address
                and len(topics) == 3
                and bytes(topics[0]) == bytes(TOPIC_TRANSFER)
            ):
                value = int.from_bytes(bytes(entry["data"]), "big")
                transfers.append((topic_address(topics[1]), topic_address(topics[2]), value))
        return transfers
