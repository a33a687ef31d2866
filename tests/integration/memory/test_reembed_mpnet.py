"""The opt-in MPNet embedder when its weights are not installed: a clear error, and the data dir
untouched (never a fallback to another embedder: one index never mixes two embedders' vectors)."""

from __future__ import annotations

import sys
from pathlib import Path

import onnxruntime  # noqa: F401  imported before the test narrows sys.path
import pytest
import tokenizers  # noqa: F401

import node.cli.main as cli_main
import node.memory.reembedding as reembed_module
from node.config import load_config
from node.db import Database
from node.init import init_node
from node.memory.embedding.embedder_onnx import ModelFilesMissing
from node.memory.facade import Memory

TEXTS = [f"note {i}: the payouts service on host-{i} paged about disk space" for i in range(12)]


@pytest.fixture
def hashing_dir(tmp_path: Path) -> Path:
    data_dir = tmp_path / "node"
    init_node(data_dir, embedder="hashing")
    memory = Memory(load_config(data_dir, environ={}))
    try:
        memory.add_crystals([memory.prepare(text) for text in TEXTS])
    finally:
        memory.close()
    return data_dir


def _snapshot(data_dir: Path) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    db = Database(data_dir / "crystals.db")
    try:
        rows = [(row[0], bytes(row[1])) for row in db.all("SELECT id, embedding FROM crystals ORDER BY rowid")]
        meta = repr(sorted(tuple(row) for row in db.all("SELECT key, value FROM meta"))).encode()
    finally:
        db.close()
    return (data_dir / "node.toml").read_bytes(), meta, rows


@pytest.fixture
def no_mpnet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No weight packages on the path and an empty model cache."""
    monkeypatch.setenv("CRYSTALMESH_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site-packages")])


def test_reembed_to_mpnet_without_weights_changes_nothing(
    hashing_dir: Path, no_mpnet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(hashing_dir)
    with pytest.raises(ModelFilesMissing, match="scripts/setup --mpnet"):
        reembed_module.reembed(load_config(hashing_dir, environ={}), "mpnet")
    assert _snapshot(hashing_dir) == before
    code = cli_main.main(["memory", "reembed", "--embedder", "mpnet", "--data-dir", str(hashing_dir)])
    _, err = capsys.readouterr()
    assert code != 0 and "scripts/setup --mpnet" in err and "Traceback" not in err
    assert _snapshot(hashing_dir) == before


def test_a_data_dir_configured_for_mpnet_does_not_open_on_another_embedder(
    hashing_dir: Path, no_mpnet: None, tmp_path: Path
) -> None:
    config = load_config(hashing_dir, environ={})
    config.memory.embedder = "mpnet"
    with pytest.raises(ModelFilesMissing):
        Memory(config)
    fresh = tmp_path / "fresh"
    assert cli_main.main(["init", "--embedder", "mpnet", "--data-dir", str(fresh)]) == 0
    assert load_config(fresh, environ={}).memory.embedder == "mpnet"
    with pytest.raises(ModelFilesMissing):
        Memory(load_config(fresh, environ={}))
