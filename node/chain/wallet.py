"""The node's secp256k1 wallet: the key that receives USDC and pays settlement gas,
and (as a buyer) signs EIP-3009 authorizations. Stored 0600 in ``<data dir>/wallet.key``."""

from __future__ import annotations

from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3

from node.chain.client import ChainClient, connect_web3
from node.keyfiles import KeyFileError, read_secret, write_secret


def load_or_create_wallet(path: Path) -> LocalAccount:
    """Load the wallet key at ``path``, creating a random one (0600) if missing."""
    if not path.exists():
        account = Account.create()
        write_secret(path, (account.key.to_0x_hex() + "\n").encode())
        return account
    return load_wallet(path)


def load_wallet(path: Path) -> LocalAccount:
    text = read_secret(path).decode("ascii", errors="replace").strip()
    try:
        return Account.from_key(text)
    except Exception as exc:
        raise KeyFileError(f"{path} does not hold a secp256k1 private key (hex)") from exc


def balances(w3_or_rpc_url: Web3 | str, token_address: str, address: str) -> dict[str, int]:
    """``{"usdc_micro": int, "eth_wei": int}`` of ``address``; raises ChainUnavailable."""
    w3 = w3_or_rpc_url if isinstance(w3_or_rpc_url, Web3) else connect_web3(w3_or_rpc_url)
    client = ChainClient(w3, token_address)
    address = to_checksum_address(address)
    return {"usdc_micro": client.usdc_balance(address), "eth_wei": client.eth_balance(address)}
