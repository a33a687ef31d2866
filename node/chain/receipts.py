"""What the chain proves about a settlement: reading receipts, revert reasons and the
mempool. Pure reads of a :class:`ChainClient`; the settlement engine decides what to
record from them.
"""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3.types import TxReceipt

from node.chain.authorization import Authorization
from node.chain.client import (
    TOPIC_AUTHORIZATION_USED,
    TOPIC_ITEM_FAILED,
    ChainClient,
    decode_revert_reason,
    encode_transfer_with_authorization,
)
from node.chain.errors import PaymentRejected

# FiatTokenV2 revert strings → PaymentRejected reasons.
_REVERT_REASONS = {
    "authorization is used or canceled": "replayed",
    "authorization is expired": "expired",
    "authorization is not yet valid": "not_yet_valid",
    "invalid signature": "bad_signature",
    "transfer amount exceeds balance": "insufficient_balance",
}


def revert_reason_code(text: str) -> str:
    lowered = text.lower()
    for needle, code in _REVERT_REASONS.items():
        if needle in lowered:
            return code
    return text


def lasting_refusal(client: ChainClient, sender: LocalAccount,
                    authorization: Authorization) -> str | None:
    """Why the token refuses ``authorization`` now, if for a reason that will not go
    away (bad signature, expired, no balance...); None if it would succeed now."""
    try:
        client.w3.eth.call({
            "from": sender.address,
            "to": client.token_address,
            "data": encode_transfer_with_authorization(authorization),  # type: ignore[typeddict-item]
        })
    except Exception as exc:  # web3's ContractLogicError, eth-tester's TransactionFailed
        reason = revert_reason_code(str(exc))
        return reason if reason in PaymentRejected.REASONS else None
    return None


def batch_outcomes(receipt: TxReceipt, settler: str | None) -> dict[int, str]:
    """index → revert reason of each item the settler reports failed (ItemFailed)."""
    outcomes: dict[int, str] = {}
    for entry in receipt["logs"]:
        if to_checksum_address(entry["address"]) != settler or not entry["topics"]:
            continue
        if bytes(entry["topics"][0]) == bytes(TOPIC_ITEM_FAILED):
            index = int.from_bytes(bytes(entry["topics"][1]), "big")
            data = bytes(entry["data"])
            # abi.encode(bytes reason): offset, length, payload
            length = int.from_bytes(data[32:64], "big")
            outcomes[index] = revert_reason_code(decode_revert_reason(data[64 : 64 + length]))
    return outcomes


def receipt_used(receipt: TxReceipt, token_address: str, authorization: Authorization) -> bool:
    """The receipt carries AuthorizationUsed(from, nonce) from the token."""
    for entry in receipt["logs"]:
        topics = entry["topics"]
        if (
            to_checksum_address(entry["address"]) == token_address
            and len(topics) == 3
            and bytes(topics[0]) == bytes(TOPIC_AUTHORIZATION_USED)
            and bytes(topics[1])[-20:] == bytes.fromhex(authorization.from_address[2:])
            and bytes(topics[2]) == authorization.nonce
        ):
            return True
    return False


def still_in_mempool(client: ChainClient, tx_hash: str) -> bool:
    """Not mined yet, but the node still knows the transaction."""
    if client.receipt(tx_hash) is not None:
        return False
    try:
        client.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
    except Exception:
        return False
    return True
