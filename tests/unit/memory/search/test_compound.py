"""Compound (multi-hop) questions: clause splitting, clause-vector merge, query-term coverage."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.memory.search.compound import coverage_order, merge_dense, split_clauses, terms


@pytest.mark.parametrize(
    ("query", "clauses"),
    [
        (
            "which host runs the worker that stalled in the April payouts incident",
            ["host runs the worker", "stalled in the April payouts incident"],
        ),
        (
            "which parish do I vote in and when did I change address with the bank",
            ["parish do I vote in", "did I change address with the bank"],
        ),
        ("when is my mother getting her joint operated on", []),  # one clause: unchanged path
        ("IRS refund", []),
        ("", []),
    ],
)
def test_split_clauses(query: str, clauses: list[str]) -> None:
    assert split_clauses(query) == clauses


def test_a_crafted_long_query_yields_at_most_four_clauses() -> None:
    query = ", ".join(f"word{i} other{i}" for i in range(800))[:4096]
    assert split_clauses(query) == [f"word{i} other{i}" for i in range(4)]


def test_terms_are_content_words_cut_to_five_characters() -> None:
    assert terms("Which worker stalled in the April incident?") == {
        "worke",
        "stall",
        "april",
        "incid",
    }


def test_merge_dense_takes_the_best_of_query_and_scaled_clause_similarity() -> None:
    full = [(1, 0.8), (2, 0.6)]
    clauses = [[(3, 0.9), (2, 0.7)], [(1, 0.5)]]
    merged = merge_dense(full, clauses, alpha=0.9)
    assert [doc for doc, _ in merged] == [3, 1, 2]
    assert [score for _, score in merged] == pytest.approx([0.81, 0.8, 0.63])


def test_coverage_order_hand_worked() -> None:
    # query terms: host, runs, worke, stall, april. Over the 3 hits df = worke 3, stall 2,
    # april 2, host 1, runs 1; idf = ln(4 / (0.5 + df)): 0.1335, 0.4700, 0.4700, 0.9808, 0.9808;
    # mass 3.0351. Round 1: A 1.0 + 0.8 * 1.0735 / 3.0351 = 1.2830, A2 1.2330,
    # B 0.9 + 0.8 * 2.0951 / 3.0351 = 1.4522 -> B. Round 2 (host, runs, worke covered):
    # A 1.0 + 0.8 * 0.94 / 3.0351 = 1.2478, A2 1.1978 -> A, then A2.
    hits = [
        ("A", 1.0, "worker stalled in April"),
        ("A2", 0.95, "worker stalled in April again"),
        ("B", 0.9, "host runs the worker"),
    ]
    ordered = coverage_order(
        "host runs worker stalled April", hits, score=lambda hit: hit[1], text=lambda hit: hit[2]
    )
    assert [hit[0] for hit in ordered] == ["B", "A", "A2"]
    assert math.isclose(math.log(4 / 1.5), 0.9808, abs_tol=1e-4)


def test_coverage_order_keeps_rank_first_on_top_and_the_tail_in_place() -> None:
    hits = [
        ("exact", 0.1, "nothing shared"),
        ("A", 1.0, "worker stalled"),
        ("B", 0.9, "host runs"),
        ("tail", 0.95, "host runs worker stalled"),
    ]
    ordered = coverage_order(
        "host runs worker stalled",
        hits,
        score=lambda hit: hit[1],
        text=lambda hit: hit[2],
        rank_first=lambda hit: 1 if hit[0] == "exact" else 0,
        depth=3,
    )
    assert [hit[0] for hit in ordered] == ["exact", "A", "B", "tail"]


def test_coverage_order_without_query_terms_or_hits_is_the_identity() -> None:
    hits = [("A", 1.0, "x"), ("B", 2.0, "y")]
    assert coverage_order("the of and", hits, score=lambda h: h[1], text=lambda h: h[2]) == hits
    assert coverage_order("host", [], score=lambda h: 0.0, text=lambda h: "") == []


@given(
    st.text(max_size=300), st.lists(st.tuples(st.floats(-5, 5), st.text(max_size=80)), max_size=30)
)
def test_coverage_order_is_a_permutation_for_any_input(
    query: str, raw: list[tuple[float, str]]
) -> None:
    hits = [(index, score, text) for index, (score, text) in enumerate(raw)]
    split_clauses(query)
    ordered = coverage_order(query, hits, score=lambda hit: hit[1], text=lambda hit: hit[2])
    assert sorted(hit[0] for hit in ordered) == list(range(len(hits)))
