"""The dense re-scoring against the store's mean vector, by hand, and the index's running mean."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from node.crystals.dense_rescore import centered_scores, rescore
from node.crystals.index import IndexParams, VectorIndex
from node.crystals.model import Crystal
from node.crystals.store import CrystalStore


def test_centered_scores_by_hand() -> None:
    # q = (1,0,0), mean μ = (0, 0.8, 0).
    # a = (0.6, 0.8, 0): raw cos 0.6; a − μ = (0.6, 0, 0)      -> centred cos 1.0
    # b = (0.8, 0, 0.6): raw cos 0.8; b − μ = (0.8, −0.8, 0.6) -> 0.8 / sqrt(1.64) = 0.624695
    # c = (0, 0.6, 0.8): raw cos 0.0; c − μ = (0, −0.2, 0.8)   -> 0.0
    # Mapped onto the raw range [0, 0.8]: a 0.8, b 0.624695 * 0.8 = 0.499756, c 0.0.
    vectors = np.array([[0.6, 0.8, 0.0], [0.8, 0.0, 0.6], [0.0, 0.6, 0.8]])
    ranked = centered_scores(
        np.array([1.0, 0.0, 0.0]), [("b", 0.8), ("a", 0.6), ("c", 0.0)], vectors[[1, 0, 2]],
        np.array([0.0, 0.8, 0.0]),
    )
    assert [doc for doc, _ in ranked] == ["a", "b", "c"]  # the common component made b look closer
    assert [score for _, score in ranked] == pytest.approx([0.8, 0.8 * 0.8 / np.sqrt(1.64), 0.0])


def test_degenerate_lists_come_back_unchanged() -> None:
    mean = np.array([0.5, 0.5])
    assert centered_scores(np.array([1.0, 0.0]), [("a", 0.3)], np.array([[1.0, 0.0]]), mean) == [("a", 0.3)]
    same = [("a", 0.9), ("b", 0.7)]
    # Both centred scores equal (the vectors are the same): nothing to tell them apart by.
    assert centered_scores(np.array([1.0, 0.0]), same, np.array([[0.6, 0.8], [0.6, 0.8]]), mean) == same



def _unit(rows: list[list[float]]) -> np.ndarray:
    array = np.array(rows, dtype=np.float64)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def test_index_mean_follows_adds_deletes_and_reloads(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "v.hnsw", IndexParams(dim=3), "test")
    assert index.mean_vector() is None  # empty index: no mean, search leaves the list alone
    rows = [[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0]]
    index.add(np.array([1, 2, 3]), np.array(rows, dtype=np.float32))
    mean = index.mean_vector()
    assert mean is not None
    assert mean == pytest.approx(_unit(rows).mean(axis=0), abs=1e-6)
    index.add(np.array([4]), np.array([[0.0, 0.0, 5.0]], dtype=np.float32))  # kept up to date
    assert index.mean_vector() == pytest.approx(_unit([*rows, [0, 0, 1]]).mean(axis=0), abs=1e-6)
    index.mark_deleted([2], deletions_checkpoint=1)
    expected = _unit([rows[0], rows[2], [0, 0, 1]]).mean(axis=0)
    assert index.mean_vector() == pytest.approx(expected, abs=1e-6)
    # A fresh object recounts from its own items (deleted label skipped), nothing is persisted.
    index._sum = None
    assert index.mean_vector() == pytest.approx(expected, abs=1e-6)


class _Mean:
    def mean_vector(self) -> np.ndarray | None:
        return np.array([0.0, 0.8, 0.0])


def test_a_crafted_or_missing_stored_vector_leaves_the_list_alone(tmp_path: Path) -> None:
    store = CrystalStore(tmp_path / "c.db")
    try:
        rowids = []
        for text, vector in (("a", [0.6, 0.8, 0.0]), ("b", [0.8, 0.0, 0.6])):
            crystal = Crystal(text, embedding=vector)
            rowids.append(store.add(crystal).rowid)
        candidates = [(rowids[1], 0.8), (rowids[0], 0.6)]
        query = np.array([1.0, 0.0, 0.0])
        assert [r for r, _ in rescore(store, _Mean(), query, candidates)] == [rowids[0], rowids[1]]
        # A blob of the wrong length (a crafted row) or a rowid with no row: no re-scoring, no error.
        store.db.execute("UPDATE crystals SET embedding = ? WHERE rowid = ?", (b"\x00" * 5, rowids[0]))
        assert rescore(store, _Mean(), query, candidates) == candidates
        assert rescore(store, _Mean(), query, [(rowids[1], 0.8), (10_000, 0.5)]) == [(rowids[1], 0.8), (10_000, 0.5)]
    finally:
        store.close()


def test_a_rebuild_sums_as_it_adds(tmp_path: Path) -> None:
    store = CrystalStore(tmp_path / "c.db")
    try:
        rows = [[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0]]
        for number, vector in enumerate(rows):
            store.add(Crystal(f"memory {number}", embedding=vector))
        index = VectorIndex(tmp_path / "v.hnsw", IndexParams(dim=3), "test")
        assert index.open(store) == "rebuilt"
        assert index._sum is not None  # no recount from the items: summed during the rebuild
        assert index.mean_vector() == pytest.approx(_unit(rows).mean(axis=0), abs=1e-6)
        reopened = VectorIndex(tmp_path / "v.hnsw", IndexParams(dim=3), "test")
        assert reopened.open(store) == "loaded"
        assert reopened.mean_vector() == pytest.approx(_unit(rows).mean(axis=0), abs=1e-6)
    finally:
        store.close()
