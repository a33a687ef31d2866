"""Confidence re-weighting and warnings first (seed 003)."""

from __future__ import annotations

import pytest

from node.memory.search.ranking import confidence_weight, surface_warnings


def test_confidence_weight_is_small_and_bounded() -> None:
    assert confidence_weight(1.0) == 1.0
    assert confidence_weight(0.0) == pytest.approx(0.9)
    assert confidence_weight(0.595) == pytest.approx(0.9595)  # 0.7 · 0.85 imported
    assert confidence_weight(7.0) == 1.0


def test_relevant_warnings_go_first_even_from_below_k() -> None:
    ranked = [("a", 1.0, False), ("b", 0.9, False), ("c", 0.85, False), ("w", 0.8, True), ("x", 0.2, True)]
    top = surface_warnings(ranked, 3, lambda h: h[2], lambda h: h[1])
    assert [h[0] for h in top] == ["w", "a", "b"]  # x scores < 0.75 of the best: not relevant


def test_nothing_to_rank() -> None:
    assert surface_warnings([], 3, lambda h: True, lambda h: 1.0) == []
