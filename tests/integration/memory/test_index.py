"""VectorIndex against a real store: open/validate states, persistence, resize, locking."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from node.crystals.index import IndexParams, VectorIndex
from node.crystals.model import Crystal, Lifecycle
from node.crystals.store import CrystalStore

DIM = 16
EMBEDDER = "test-16"


def unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CrystalStore]:
    opened = CrystalStore(tmp_path / "crystals.db")
    opened.bind_embedder(EMBEDDER, DIM)
    try:
        yield opened
    finally:
        opened.close()


def new_index(tmp_path: Path, ef_search: int = 50) -> VectorIndex:
    return VectorIndex(tmp_path / "index.hnsw", IndexParams(dim=DIM, ef_search=ef_search), EMBEDDER)


def add_rows(store: CrystalStore, vectors: np.ndarray, prefix: str = "row") -> np.ndarray:
    """Store crystals carrying ``vectors``; returns their rowids."""
    results = store.add_many(
        [Crystal(text=f"{prefix} {i}", embedding=v.tolist()) for i, v in enumerate(vectors)]
    )
    return np.array([r.rowid for r in results], dtype=np.int64)


def exact_top(vectors: np.ndarray, rowids: np.ndarray, query: np.ndarray, k: int) -> set[int]:
    return set(rowids[np.argsort(-(vectors @ query))[:k]].tolist())


def test_open_on_empty_store(tmp_path: Path, store: CrystalStore) -> None:
    index = new_index(tmp_path)
    assert index.open(store) == "rebuilt"  # nothing on disk yet
    assert index.count == 0
    assert index.query(unit_vectors(1, 0)[0], 5) == []
    assert index.path.exists() and index.sidecar.exists()
    assert new_index(tmp_path).open(store) == "loaded"


def test_add_and_query_recall(tmp_path: Path, store: CrystalStore) -> None:
    vectors = unit_vectors(500, 1)
    rowids = add_rows(store, vectors)
    index = new_index(tmp_path)
    index.open(store)
    assert index.count == 500
    queries = unit_vectors(50, 2)
    found = 0
    for query in queries:
        hits = index.query(query, 10)
        assert len(hits) == 10
        similarities = [similarity for _, similarity in hits]
        assert similarities == sorted(similarities, reverse=True)
        found += len({rowid for rowid, _ in hits} & exact_top(vectors, rowids, query, 10))
    assert found / (10 * len(queries)) >= 0.95
    # A stored vector is its own nearest neighbour with cosine 1.
    top_rowid, similarity = index.query(vectors[123], 1)[0]
    assert top_rowid == rowids[123]
    assert similarity == pytest.approx(1.0, abs=1e-5)


def test_save_and_load_keep_results_and_ef(tmp_path: Path, store: CrystalStore) -> None:
    add_rows(store, unit_vectors(300, 3))
    index = new_index(tmp_path, ef_search=77)
    index.open(store)
    queries = unit_vectors(20, 4)
    before = [index.query(q, 10) for q in queries]
    index.save()

    reopened = new_index(tmp_path, ef_search=77)
    assert reopened.open(store) == "loaded"
    # hnswlib resets ef to 10 on load_index; open() must restore the configured value.
    assert reopened._index.ef == 77
    assert reopened.count == 300
    after = [reopened.query(q, 10) for q in queries]
    assert [[r for r, _ in hits] for hits in after] == [[r for r, _ in hits] for hits in before]


def test_rows_added_after_save_are_caught_up(tmp_path: Path, store: CrystalStore) -> None:
    add_rows(store, unit_vectors(100, 5), "old")
    index = new_index(tmp_path)
    index.open(store)
    late_vectors = unit_vectors(40, 6)
    late = add_rows(store, late_vectors, "late")  # written while the index was not looking

    reopened = new_index(tmp_path)
    assert reopened.open(store) == "caught_up"
    assert reopened.count == 140 == store.vector_stats()[0]
    assert reopened.query(late_vectors[-1], 1)[0][0] == late[-1]
    # The catch-up was saved: the next open has nothing to do.
    assert new_index(tmp_path).open(store) == "loaded"


def test_deletions_unknown_to_the_index_force_a_rebuild(tmp_path: Path, store: CrystalStore) -> None:
    vectors = unit_vectors(60, 7)
    rowids = add_rows(store, vectors)
    index = new_index(tmp_path)
    index.open(store)
    gone = store.get_by_rowids([int(rowids[0])])[int(rowids[0])]
    store.set_lifecycle(gone.id, Lifecycle.EXPIRED, "test")
    assert store.purge() == [int(rowids[0])]  # the index is never told

    reopened = new_index(tmp_path)
    assert reopened.open(store) == "rebuilt"
    assert reopened.count == 59
    assert int(rowids[0]) not in {rowid for rowid, _ in reopened.query(vectors[0], 10)}


def test_mark_deleted_then_reopen_is_loaded(tmp_path: Path, store: CrystalStore) -> None:
    vectors = unit_vectors(60, 8)
    rowids = add_rows(store, vectors)
    index = new_index(tmp_path)
    index.open(store)
    victim = store.get_by_rowids([int(rowids[5])])[int(rowids[5])]
    store.set_lifecycle(victim.id, Lifecycle.ARCHIVED, "test")
    removed = store.purge()
    index.mark_deleted(removed, store.checkpoint("vector_deletions"))
    index.save()
    assert index.count == 59
    assert int(rowids[5]) not in {rowid for rowid, _ in index.query(vectors[5], 5)}
    reopened = new_index(tmp_path)
    assert reopened.open(store) == "loaded"
    assert reopened.count == 59


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.unlink(),
        lambda path: path.write_bytes(b""),
        lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
        lambda path: path.write_bytes(bytes(reversed(path.read_bytes()))),
    ],
    ids=["missing", "empty", "truncated", "scrambled"],
)
def test_damaged_index_file_is_rebuilt(tmp_path: Path, store: CrystalStore, damage) -> None:  # type: ignore[no-untyped-def]
    vectors = unit_vectors(80, 9)
    rowids = add_rows(store, vectors)
    new_index(tmp_path).open(store)
    damage(tmp_path / "index.hnsw")
    reopened = new_index(tmp_path)
    assert reopened.open(store) == "rebuilt"
    assert reopened.count == 80
    assert reopened.query(vectors[10], 1)[0][0] == rowids[10]


def test_stale_or_foreign_sidecar_is_rebuilt(tmp_path: Path, store: CrystalStore) -> None:
    add_rows(store, unit_vectors(30, 10))
    index = new_index(tmp_path)
    index.open(store)
    sidecar = json.loads(index.sidecar.read_text())
    index.sidecar.write_text(json.dumps(sidecar | {"embedder": "another-model"}))
    assert new_index(tmp_path).open(store) == "rebuilt"
    index.sidecar.write_text(json.dumps(sidecar | {"count": 29}))  # disagrees with the store
    assert new_index(tmp_path).open(store) == "rebuilt"
    index.sidecar.write_text("{not json")
    assert new_index(tmp_path).open(store) == "rebuilt"


def test_resize_beyond_initial_capacity(tmp_path: Path, store: CrystalStore) -> None:
    index = new_index(tmp_path)
    index.open(store)
    initial = index._index.get_max_elements()
    vectors = unit_vectors(initial + 500, 11)
    rowids = np.arange(1, len(vectors) + 1, dtype=np.int64)
    for start in range(0, len(vectors), 300):
        index.add(rowids[start : start + 300], vectors[start : start + 300])
    assert index.count == len(vectors)
    assert index._index.get_max_elements() >= len(vectors)
    assert index.query(vectors[-1], 1)[0][0] == rowids[-1]


def test_adding_after_deletions_at_full_capacity(tmp_path: Path, store: CrystalStore) -> None:
    # Deleted labels still occupy hnswlib slots: capacity must count them.
    index = new_index(tmp_path)
    index.open(store)
    capacity = index._index.get_max_elements()
    vectors = unit_vectors(capacity + 10, 12)
    index.add(np.arange(1, capacity + 1), vectors[:capacity])
    index.mark_deleted(list(range(1, 11)), 1)
    index.add(np.arange(capacity + 1, capacity + 11), vectors[capacity:])
    assert index.count == capacity
    assert index.query(vectors[-1], 1)[0][0] == capacity + 10


def test_wrong_dimension_is_refused(tmp_path: Path, store: CrystalStore) -> None:
    index = new_index(tmp_path)
    index.open(store)
    with pytest.raises(ValueError, match="dim 8 != index dim 16"):
        index.add(np.array([1]), np.zeros((1, 8), dtype=np.float32))
    assert index.count == 0


def test_concurrent_add_and_query(tmp_path: Path, store: CrystalStore) -> None:
    """A writer that keeps resizing the index while a reader queries it."""
    index = new_index(tmp_path)
    index.open(store)
    vectors = unit_vectors(4000, 13)
    index.add(np.arange(1, 101), vectors[:100])
    errors: list[BaseException] = []
    writer_done = threading.Event()
    queries = {"n": 0}

    def write() -> None:
        try:
            for start in range(100, len(vectors), 100):
                index.add(np.arange(start + 1, start + 101), vectors[start : start + 100])
        except BaseException as exc:
            errors.append(exc)
        finally:
            writer_done.set()

    def read() -> None:
        try:
            while not writer_done.is_set():
                hits = index.query(vectors[queries["n"] % 100], 5)
                assert hits and hits[0][0] == queries["n"] % 100 + 1
                queries["n"] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert queries["n"] > 0
    assert index.count == 4000


def test_crash_between_index_write_and_sidecar_write(tmp_path: Path, store: CrystalStore) -> None:
    """save() replaces the index file first: a crash before the sidecar leaves a stale sidecar."""
    add_rows(store, unit_vectors(50, 14), "before")
    index = new_index(tmp_path)
    index.open(store)
    late_vectors = unit_vectors(30, 15)
    late = add_rows(store, late_vectors, "after")
    index.add(late, late_vectors)
    index._index.save_index(str(index.path))  # the first half of save(), then "crash"

    reopened = new_index(tmp_path)
    assert reopened.open(store) in {"caught_up", "rebuilt"}
    assert reopened.count == 80 == store.vector_stats()[0]
    assert reopened._index.get_current_count() == 80
    assert reopened.query(late_vectors[0], 1)[0][0] == late[0]


def test_overwritten_index_file_is_detected_and_rebuilt(tmp_path: Path) -> None:
    """Issue 12 row 2: 64 KiB overwritten in the middle of index.hnsw (same size) loaded as valid
    and hnswlib later segfaulted. The checksum must catch it; searches run in a child process
    so a segfault would fail this test instead of killing pytest."""
    import os
    import subprocess
    import sys

    child = """
import sys
from node.config import load_config
from node.memory.facade import Memory, SearchRequest
config = load_config(sys.argv[1], overrides={"memory": {"embedder": "hashing"}}, environ={})
memory = Memory(config)
if sys.argv[2] == "fill":
    memory.add_crystals([memory.prepare(f"checksum crystal {i} marker{i}") for i in range(3000)])
    memory.index.save()
else:
    print(memory.index_state, flush=True)
    for i in range(200):
        hits = memory.search(SearchRequest(query=f"checksum crystal {i} marker{i}", k=5))
        assert hits and hits[0].crystal.text == f"checksum crystal {i} marker{i}", i
    print("ok", flush=True)
memory.close()
"""
    data_dir = tmp_path / "node"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTALMESH_")}
    run = lambda mode: subprocess.run([sys.executable, "-c", child, str(data_dir), mode],  # noqa: E731
                                      capture_output=True, text=True, env=env, timeout=300)
    assert run("fill").returncode == 0
    index_file = data_dir / "index.hnsw"
    size = index_file.stat().st_size
    with open(index_file, "r+b") as handle:
        handle.seek(size // 2)
        handle.write(os.urandom(64 * 1024))
    assert index_file.stat().st_size == size
    result = run("search")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["rebuilt", "ok"]
