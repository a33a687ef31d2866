"""The committed contract artifacts are built from the current contract sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from node.chain.contracts import ARTIFACTS_DIR, REPO_ROOT, load_artifact, sources_sha256
from tests.support.tools import missing_tool

CONTRACTS = ["USDC", "BatchSettler", "ChannelSettlement", "ERC3009DepositCollector", "Multicall3"]


@pytest.mark.parametrize("name", CONTRACTS)
def test_artifact_records_hash_of_current_sources(name: str) -> None:
    artifact = load_artifact(name)
    assert artifact.sources_sha256 == sources_sha256(), (
        f"{name}.json is stale: run `node devnet/build_contracts.mjs` and commit the artifacts"
    )
    assert artifact.bytecode and artifact.deployed_bytecode
    assert artifact.compiler["evmVersion"] == "cancun"
    assert artifact.compiler["optimizer"]["enabled"] is True


def test_usdc_has_no_immutables_and_owner_slot() -> None:
    """Code copied to another address must keep working: no immutables, owner in storage."""
    raw = json.loads((ARTIFACTS_DIR / "USDC.json").read_text())
    assert load_artifact("USDC").slot("owner") >= 0
    assert not load_artifact("USDC").immutable_offsets
    assert raw["abi"]


def test_channel_contracts_placed_without_constructor() -> None:
    """The channel contract has no immutables (its EIP-712 domain uses address(this)); the
    deposit collector's one immutable, the channel contract's address, is written in."""
    from x402.mechanisms.evm.batch_settlement.constants import (
        BATCH_SETTLEMENT_ADDRESS,
        ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
    )

    from node.chain.contracts import channel_contract_codes

    assert not load_artifact("ChannelSettlement").immutable_offsets
    collector = load_artifact("ERC3009DepositCollector")
    assert collector.immutable_offsets
    codes = channel_contract_codes()
    placed = codes[ERC3009_DEPOSIT_COLLECTOR_ADDRESS]
    for offset in collector.immutable_offsets:
        assert placed[offset:offset + 32] == bytes(12) + bytes.fromhex(BATCH_SETTLEMENT_ADDRESS[2:])
    assert len(placed) == len(collector.deployed_bytecode)


def test_rebuild_gives_identical_bytecode(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (REPO_ROOT / "tools" / "node_modules" / "solc").exists():
        missing_tool("node or tools/node_modules/solc missing (scripts/setup)")
    subprocess.run([node, str(REPO_ROOT / "devnet" / "build_contracts.mjs"), "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    for name in CONTRACTS:
        rebuilt = json.loads((tmp_path / f"{name}.json").read_text())
        committed = json.loads((ARTIFACTS_DIR / f"{name}.json").read_text())
        assert rebuilt["bytecode"] == committed["bytecode"], name
        assert rebuilt["deployedBytecode"] == committed["deployedBytecode"], name
        assert rebuilt["abi"] == committed["abi"], name
        assert rebuilt.get("immutableOffsets") == committed.get("immutableOffsets"), name


def test_a_devnet_port_is_handed_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``free_port`` drew the same free port twice before either was bound (one node got it for
    both its libp2p listener and its API, and exited at start-up): a port it handed out is
    never handed out again in this process, though the probe would find it free."""
    from node.chain import localchain

    draws = iter([40001, 40001, 40002])
    monkeypatch.setattr(localchain.random, "randint", lambda low, high: next(draws))
    monkeypatch.setattr(localchain, "_ephemeral_range", lambda: (50000, 60000))
    monkeypatch.setattr(localchain, "_HANDED_OUT", set())
    assert [localchain.free_port(), localchain.free_port()] == [40001, 40002]
