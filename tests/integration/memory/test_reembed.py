"""``crystalmesh memory reembed``: all vectors move to the new embedder, or none do.

Real SQLite, real HNSW index, the real MiniLM embedder as the target, and a
real ``crystalmesh`` subprocess killed with SIGKILL while it embeds.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from node.config import load_config
from node.db import Database
from node.init import init_node
from node.memory import reembedding as reembed_module
from node.memory.embedding.embedder import (
    HashingEmbedder,
    MiniLMEmbedder,
    embed_windows,
    get_embedder,
)
from node.memory.facade import Memory, SearchRequest
from node.memory.reembedding import ReembedError, reembed
from tests.fixtures.window_texts import GARDEN, SECRET

CRYSTALMESH = Path(sys.executable).parent / "crystalmesh"
TEXTS = [
    f"note {i}: the {word} service on host-{i % 17} paged at {i % 24:02d}:00 about {other}"
    for i, (word, other) in enumerate(
        (w, o)
        for w in ("payments", "ledger", "payouts", "fx", "cards", "search")
        for o in ("latency", "disk space", "certificates", "lag", "timeouts", "memory")
    )
]


def _dir_with(data_dir: Path, texts: list[str]) -> None:
    init_node(data_dir, embedder="hashing")
    memory = Memory(load_config(data_dir, environ={}))
    try:
        memory.add_crystals([memory.prepare(text) for text in texts])
    finally:
        memory.close()


def _state(data_dir: Path) -> tuple[str, list[tuple[str, str]], str | None]:
    """(digest of every embedding blob, (id, text) of every crystal, stored embedder name)."""
    db = Database(data_dir / "crystals.db")
    try:
        rows = db.all("SELECT id, text, embedding FROM crystals ORDER BY rowid")
        digest = hashlib.sha256(b"".join(bytes(row[2] or b"") for row in rows)).hexdigest()
        return digest, [(row[0], row[1]) for row in rows], db.get_meta("embedder_name")
    finally:
        db.close()


def _blobs(data_dir: Path) -> dict[str, bytes]:
    db = Database(data_dir / "crystals.db")
    try:
        return {row[0]: bytes(row[1]) for row in db.all("SELECT id, embedding FROM crystals")}
    finally:
        db.close()


def _search(data_dir: Path, query: str) -> list[str]:
    memory = Memory(load_config(data_dir, environ={}))
    try:
        return [
            hit.crystal.text
            for hit in memory.search(SearchRequest(query, k=5, record_access=False))
        ]
    finally:
        memory.close()


def test_reembed_moves_every_vector_and_keeps_every_crystal(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    _dir_with(data_dir, TEXTS)
    _, crystals_before, name_before = _state(data_dir)
    assert name_before == "hashing-384"

    report = reembed(load_config(data_dir, environ={}), "minilm")

    assert report.crystals == len(TEXTS)
    _, crystals_after, name_after = _state(data_dir)
    assert crystals_after == crystals_before  # nothing lost, nothing added
    minilm = get_embedder("minilm")
    assert name_after == minilm.name
    assert load_config(data_dir, environ={}).memory.embedder == "minilm"
    memory = Memory(load_config(data_dir, environ={}))
    try:
        assert memory.index_state == "loaded"  # the index built aside was swapped in whole
        assert memory.index.count == len(TEXTS)
        stored = np.vstack([vectors for _, vectors in memory.store.vectors()])
        expected = minilm.embed([text for _, text in crystals_before])
        assert float(np.min(np.sum(stored * expected, axis=1))) > 0.98
        hits = memory.search(SearchRequest("fx lag on host-5", k=3, record_access=False))
        assert hits and hits[0].crystal.text in TEXTS
    finally:
        memory.close()


def test_sigkill_while_embedding_leaves_the_old_store_usable(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    texts = [f"{text} (copy {copy})" for copy in range(40) for text in TEXTS]  # 1,440 crystals
    _dir_with(data_dir, texts)
    before = _state(data_dir)
    results_before = _search(data_dir, "payouts certificates")
    toml_before = (data_dir / "node.toml").read_text()

    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTALMESH_")}
    env["CRYSTALMESH_HOME"] = str(tmp_path / "home")
    if "CRYSTALMESH_MODEL_CACHE" in os.environ:
        env["CRYSTALMESH_MODEL_CACHE"] = os.environ["CRYSTALMESH_MODEL_CACHE"]
    process = subprocess.Popen(
        [
            str(CRYSTALMESH),
            "memory",
            "reembed",
            "--embedder",
            "minilm",
            "--data-dir",
            str(data_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    seen: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if line.startswith("reembedding "):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(timeout=180), "".join(seen)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
    reader.join(timeout=10)
    last = [line for line in seen if line.startswith("reembedding ")][-1]
    done, total = (int(part) for part in last.split()[1].split("/"))
    assert done < total, "the kill came after the embedding finished; the test proved nothing"

    assert _state(data_dir) == before  # not one vector, crystal or meta value changed
    assert (data_dir / "node.toml").read_text() == toml_before
    assert _search(data_dir, "payouts certificates") == results_before


def test_a_crash_after_the_commit_opens_on_the_new_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the commit and the node.toml rewrite: the store is the authority."""
    data_dir = tmp_path / "node"
    _dir_with(data_dir, TEXTS)

    def die(*_: object) -> None:
        raise KeyboardInterrupt  # stands for the process dying right after the commit

    monkeypatch.setattr(reembed_module, "_write_config", die)
    with pytest.raises(KeyboardInterrupt):
        reembed(load_config(data_dir, environ={}), "minilm")
    monkeypatch.undo()

    config = load_config(data_dir, environ={})
    assert config.memory.embedder == "hashing"  # node.toml still names the old one
    memory = Memory(config)
    try:
        assert memory.embedder.name == get_embedder("minilm").name
        assert memory.index_state == "rebuilt"  # the old index named the old embedder
        hits = memory.search(SearchRequest("fx lag on host-5", k=3, record_access=False))
        assert hits
    finally:
        memory.close()


class _WritesMeanwhile:
    """An embedder that adds a crystal through a second connection while it embeds."""

    def __init__(self, data_dir: Path) -> None:
        self.inner = HashingEmbedder()
        self.name = "hashing-384"
        self.dim = self.inner.dim
        self.data_dir = data_dir
        self.done = False

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.done:
            self.done = True
            other = Memory(load_config(self.data_dir, environ={}))
            try:
                other.add("a crystal written by someone else during the re-embed")
            finally:
                other.close()
        return self.inner.embed(texts)


def test_reembed_refuses_when_the_store_changed_meanwhile(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    _dir_with(data_dir, TEXTS)
    writer = _WritesMeanwhile(data_dir)
    _, crystals_before, name_before = _state(data_dir)
    blobs_before = _blobs(data_dir)

    with pytest.raises(ReembedError):
        reembed(load_config(data_dir, environ={}), "hashing", embedder=writer)

    _, crystals_after, name_after = _state(data_dir)
    assert len(crystals_after) == len(crystals_before) + 1  # only the other writer's crystal
    blobs_after = _blobs(data_dir)
    assert {key: blobs_after[key] for key in blobs_before} == blobs_before
    assert name_after == name_before
    assert load_config(data_dir, environ={}).memory.embedder == "hashing"
    db = Database(data_dir / "crystals.db")
    try:
        assert db.get_meta("embedder_migrated_from") is None
    finally:
        db.close()


def test_a_crafted_embedder_key_in_the_store_is_not_trusted(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    _dir_with(data_dir, TEXTS)
    db = Database(data_dir / "crystals.db")
    try:
        db.set_meta("embedder_key", "../../evil")
        db.set_meta("embedder_migrated_from", "hashing")
    finally:
        db.close()
    assert _search(data_dir, "fx lag")  # opens with node.toml's embedder, as before


def test_the_cli_reembeds_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from node.cli.main import main

    data_dir = tmp_path / "node"
    _dir_with(data_dir, TEXTS[:5])
    code = main(["memory", "reembed", "--embedder", "minilm", "--data-dir", str(data_dir), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["crystals"] == 5 and report["old_embedder"] == "hashing-384"
    assert report["new_embedder"] == get_embedder("minilm").name
    assert "reembedding 5/5" in err
    code = main(["memory", "reembed", "--embedder", "nope", "--data-dir", str(data_dir)])
    assert code != 0
    assert load_config(data_dir, environ={}).memory.embedder == "minilm"


def test_reembed_to_the_same_embedder_rewrites_cut_off_long_memories(tmp_path: Path) -> None:
    """The upgrade path docs/memory.md gives for memories embedded before long texts were read
    whole: ``reembed`` to the embedder the store already uses rewrites every vector."""
    data_dir = tmp_path / "node"
    init_node(data_dir, embedder="minilm")
    long_text = GARDEN + SECRET
    before = Memory(load_config(data_dir, environ={}), embedder=MiniLMEmbedder(max_windows=1))
    try:  # as a node before this change stored it: cut at the first window
        before.add_crystals([before.prepare(text) for text in [long_text, *TEXTS[:5]]])
    finally:
        before.close()
    whole = get_embedder("minilm").embed([long_text])[0]
    assert float(_vectors_by_text(data_dir)[long_text] @ whole) < 0.9

    report = reembed(load_config(data_dir, environ={}), "minilm")

    assert report.crystals == 6
    assert float(_vectors_by_text(data_dir)[long_text] @ whole) > 0.999
    assert _state(data_dir)[2] == get_embedder("minilm").name
    # The long memory now also has its window vectors, the model's own (search scores its best).
    _, [expected] = embed_windows(get_embedder("minilm"), [long_text])
    [(embedder, windows)] = _windows(data_dir)
    assert embedder == get_embedder("minilm").name and expected is not None
    assert windows.shape == expected.shape and float(np.min(np.sum(windows * expected, axis=1))) > 0.999

    # To an embedder that reads no windows: no window vector of the old one may stay.
    reembed(load_config(data_dir, environ={}), "hashing")
    assert _windows(data_dir) == []


def _windows(data_dir: Path) -> list[tuple[str, np.ndarray]]:
    db = Database(data_dir / "crystals.db")
    try:
        rows = db.all("SELECT embedder, vectors FROM crystal_windows")
        return [(row[0], np.frombuffer(bytes(row[1]), dtype=np.float32).reshape(-1, 384)) for row in rows]
    finally:
        db.close()


def _vectors_by_text(data_dir: Path) -> dict[str, np.ndarray]:
    db = Database(data_dir / "crystals.db")
    try:
        rows = db.all("SELECT text, embedding FROM crystals")
        return {row[0]: np.frombuffer(bytes(row[1]), dtype=np.float32) for row in rows}
    finally:
        db.close()
