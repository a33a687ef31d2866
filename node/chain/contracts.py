"""Compiled contract artifacts (USDC, BatchSettler, the batch-settlement channel contracts)
and where the devnet puts them.

The artifacts in ``node/chain/artifacts`` are built from ``devnet/contracts`` by
``node devnet/build_contracts.mjs`` and committed, so a node needs no compiler.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from eth_utils import to_checksum_address

ARTIFACTS_DIR = Path(__file__).with_name("artifacts")
REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = REPO_ROOT / "devnet" / "contracts"

# Real USDC's EIP-712 domain (FiatTokenV2): x402 and wallets sign against these.
TOKEN_DOMAIN_NAME = "USDC"
TOKEN_DOMAIN_VERSION = "2"
TOKEN_DECIMALS = 6


@dataclass(frozen=True)
class Artifact:
    name: str
    abi: list[dict[str, Any]]
    bytecode: bytes
    deployed_bytecode: bytes
    storage_slots: dict[str, int]
    sources_sha256: str
    compiler: dict[str, Any]
    immutable_offsets: tuple[int, ...] = ()

    def slot(self, label: str) -> int:
        return self.storage_slots[label]

    def runtime_with_immutables(self, value: int) -> bytes:
        """The runtime code with every immutable set to ``value`` (one 32-byte word each):
        what the constructor would have written, for placing the code without running it."""
        code = bytearray(self.deployed_bytecode)
        for offset in self.immutable_offsets:
            code[offset:offset + 32] = value.to_bytes(32, "big")
        return bytes(code)


@cache
def load_artifact(name: str) -> Artifact:
    """Load ``artifacts/<name>.json`` (a contract name in ``devnet/contracts``)."""
    raw = json.loads((ARTIFACTS_DIR / f"{name}.json").read_text())
    return Artifact(
        name=name,
        abi=raw["abi"],
        bytecode=bytes.fromhex(raw["bytecode"].removeprefix("0x")),
        deployed_bytecode=bytes.fromhex(raw["deployedBytecode"].removeprefix("0x")),
        storage_slots={entry["label"]: int(entry["slot"]) for entry in raw["storageLayout"]},
        sources_sha256=raw["sourcesSha256"],
        compiler=raw["compiler"],
        immutable_offsets=tuple(int(offset) for offset in raw.get("immutableOffsets", ())),
    )


def usdc_artifact() -> Artifact:
    return load_artifact("USDC")


def settler_artifact() -> Artifact:
    return load_artifact("BatchSettler")


def channel_contract_codes() -> dict[str, bytes]:
    """The runtime code of the batch-settlement contracts, by the canonical address the x402
    SDK calls them at: the channel contract, its EIP-3009 deposit collector (whose one
    immutable is the channel contract's address) and the Multicall3 the SDK reads through.

    A devnet places these with ``anvil_setCode`` (or in genesis); the SDK's Permit2 deposit
    collector is not placed (Permit2 itself is absent from a devnet and our requirements
    never ask for ``permit2``).
    """
    from x402.mechanisms.evm.batch_settlement.constants import (
        BATCH_SETTLEMENT_ADDRESS,
        ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
    )
    from x402.mechanisms.evm.constants import MULTICALL3_ADDRESS

    settlement = to_checksum_address(BATCH_SETTLEMENT_ADDRESS)
    return {
        settlement: load_artifact("ChannelSettlement").deployed_bytecode,
        to_checksum_address(ERC3009_DEPOSIT_COLLECTOR_ADDRESS):
            load_artifact("ERC3009DepositCollector").runtime_with_immutables(int(settlement, 16)),
        to_checksum_address(MULTICALL3_ADDRESS): load_artifact("Multicall3").deployed_bytecode,
    }


def sources_sha256(contracts_dir: Path = CONTRACTS_DIR) -> str:
    """Hash of every ``*.sol`` in ``contracts_dir``; must match build_contracts.mjs."""
    digest = hashlib.sha256()
    for path in sorted(contracts_dir.glob("*.sol"), key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def usdc_genesis_storage(owner: str) -> dict[int, int]:
    """The storage a freshly constructed USDC has (only ``owner`` is set).

    Used to place the token's runtime code at a fixed address (Base Sepolia USDC's)
    without running its constructor there.
    """
    return {usdc_artifact().slot("owner"): int(to_checksum_address(owner), 16)}
