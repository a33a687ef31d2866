"""The dense re-scoring against the store's mean vector, by hand, and the index's running mean."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from node.crystals.dense_rescore import centered_scores, rescore
from node.crystals.index import IndexParams, VectorIndex


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


class _Missing:
    def items(self, rowids: list[int]) -> np.ndarray | None:
        return None

    def mean_vector(self) -> np.ndarray | None:
        return np.zeros(2)


def test_rescore_keeps_the_list_when_a_vector_is_missing() -> None:
    candidates = [(3, 0.9), (1, 0.2)]
    assert rescore(_Missing(), np.array([1.0, 0.0]), candidates) == candidates


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
    assert index.items([2]) is None  # a deleted vector is not served
    # A fresh object recounts from its own items (deleted label skipped), nothing is persisted.
    index._sum = None
    assert index.mean_vector() == pytest.approx(expected, abs=1e-6)
