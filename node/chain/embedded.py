"""An in-process chain for tests: eth-tester's py-evm backend with the devnet layout
(chain id 84532, USDC at Base Sepolia USDC's address, a BatchSettler, the batch-settlement
channel contracts at the x402 SDK's canonical addresses, funded wallets),
behind a normal :class:`web3.Web3`. No processes, no ports; ~1 s to start.

eth-tester is a dev dependency (``pip install -e .[dev]``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import to_canonical_address, to_wei
from web3 import Web3

from node.chain.client import ChainClient
from node.chain.contracts import (
    channel_contract_codes,
    settler_artifact,
    usdc_artifact,
    usdc_genesis_storage,
)
from node.chain.localchain import check_token, deploy_contract, fund
from node.config import BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC


@dataclass
class EmbeddedChain:
    w3: Web3
    chain_id: int
    token_address: str
    settler_address: str
    deployer: LocalAccount
    accounts: list[LocalAccount]
    backend: Any

    def client(self, with_settler: bool = True) -> ChainClient:
        return ChainClient(self.w3, self.token_address, self.settler_address if with_settler else None,
                           expected_chain_id=self.chain_id)

    def advance_time(self, seconds: int) -> None:
        """Move the next block's timestamp forward (expiry tests)."""
        self.backend.time_travel(self.w3.eth.get_block("latest")["timestamp"] + seconds)


def start_embedded_chain(
    n_accounts: int = 4,
    usdc_micro: int = 10_000_000,
    eth_wei: int = to_wei(10, "ether"),
    chain_id: int = BASE_SEPOLIA_CHAIN_ID,
) -> EmbeddedChain:
    """A fresh chain with ``n_accounts`` random wallets holding ``usdc_micro`` and ``eth_wei``."""
    from eth_tester import EthereumTester, PyEVMBackend
    from web3.providers.eth_tester import EthereumTesterProvider
    from web3.providers.eth_tester.defaults import API_ENDPOINTS

    deployer = Account.create()
    # eth-tester's own first account stays funded: it is the default sender of eth_call.
    genesis_state = {
        **PyEVMBackend.generate_genesis_state(num_accounts=1),
        to_canonical_address(deployer.address): {
            "balance": to_wei(1_000_000, "ether"), "nonce": 0, "code": b"", "storage": {},
        },
        to_canonical_address(BASE_SEPOLIA_USDC): {
            "balance": 0, "nonce": 1, "code": usdc_artifact().deployed_bytecode,
            "storage": usdc_genesis_storage(deployer.address),
        },
        **{to_canonical_address(address): {"balance": 0, "nonce": 1, "code": code, "storage": {}}
           for address, code in channel_contract_codes().items()},
    }
    backend = PyEVMBackend(genesis_state=genesis_state)
    # The chain id lives on the py-evm chain class (signatures, CHAINID opcode) and,
    # separately, in the eth_chainId endpoint.
    type(backend.chain).chain_id = chain_id
    endpoints = {**API_ENDPOINTS, "eth": {**API_ENDPOINTS["eth"], "chainId": lambda *_: chain_id}}
    provider = EthereumTesterProvider(EthereumTester(backend), api_endpoints=endpoints)
    # eth-tester is not thread-safe and the engine calls it from trio worker threads.
    lock = threading.Lock()
    unlocked_request = provider.make_request

    def make_request(method: Any, params: Any) -> Any:
        with lock:
            return unlocked_request(method, params)

    provider.make_request = make_request  # type: ignore[method-assign]
    w3 = Web3(provider)

    client = ChainClient(w3, BASE_SEPOLIA_USDC)
    settler_address = deploy_contract(client, deployer, settler_artifact().bytecode)
    check_token(w3, BASE_SEPOLIA_USDC, chain_id)
    accounts = [Account.create() for _ in range(n_accounts)]
    fund(w3, [account.address for account in accounts], usdc_micro=usdc_micro, eth_wei=eth_wei,
         deployer_key=deployer.key.to_0x_hex(), token_address=BASE_SEPOLIA_USDC)
    return EmbeddedChain(w3=w3, chain_id=chain_id, token_address=BASE_SEPOLIA_USDC,
                         settler_address=settler_address, deployer=deployer, accounts=accounts,
                         backend=backend)
