"""The committed contract artifacts are built from the current contract sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from node.chain.contracts import ARTIFACTS_DIR, REPO_ROOT, load_artifact, sources_sha256
from tests.support.tools import missing_tool

CONTRACTS = ["USDC", "BatchSettler"]


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
    # solc lists immutables in the runtime's immutableReferences; our build does not
    # request them, so check the source instead.
    source = (REPO_ROOT / "devnet" / "contracts" / "USDC.sol").read_text()
    assert " immutable " not in source
    assert raw["abi"]


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
