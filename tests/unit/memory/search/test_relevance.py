"""The calibrated relevance of a hit (node/memory/search/relevance.py): a probability, monotone in its evidence."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from node.memory.search.relevance import DEFAULT_CALIBRATION, relevance

scores = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)  # deviations above the dense mean
shares = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
ranks = st.integers(min_value=0, max_value=200)


@given(scores, shares, ranks)
def test_relevance_is_a_probability(dense: float, lexical: float, rank: int) -> None:
    assert 0.0 <= relevance(dense, lexical, rank) <= 1.0


@given(scores, scores, shares, ranks)
def test_relevance_never_falls_when_the_dense_score_rises(low: float, high: float, lexical: float, rank: int) -> None:
    low, high = sorted((low, high))
    assert relevance(low, lexical, rank) <= relevance(high, lexical, rank)


@given(scores, shares, shares, ranks)
def test_relevance_never_falls_when_the_lexical_share_rises(dense: float, low: float, high: float, rank: int) -> None:
    low, high = sorted((low, high))
    assert relevance(dense, low, rank) <= relevance(dense, high, rank)


@given(scores, shares, ranks, ranks)
def test_relevance_never_rises_further_down_the_list(dense: float, lexical: float, first: int, later: int) -> None:
    first, later = sorted((first, later))
    assert relevance(dense, lexical, later) <= relevance(dense, lexical, first)


def test_a_close_first_hit_is_likely_relevant_and_a_far_one_is_not() -> None:
    # A first hit far above the other dense candidates that holds the query's words, against a
    # tenth hit at the dense mean with none of them.
    assert relevance(5.0, 1.0, 0) > 0.8
    assert relevance(0.0, 0.0, 9) < 0.05
    assert DEFAULT_CALIBRATION.dense > 0 and DEFAULT_CALIBRATION.lexical > 0 and DEFAULT_CALIBRATION.rank > 0
