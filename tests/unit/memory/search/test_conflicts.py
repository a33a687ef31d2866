"""Conflicting hits are settled by epistemic layer (directive > world fact > experience), nothing else moves."""

from __future__ import annotations

import pytest

from node.crystals import precedence
from node.memory.search.conflicts import conflicts, settle_conflicts


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("the user never wants semicolons in code",
     "Learned from experience: the user wants semicolons at the end of lines", True),
    ("User prefers tabs", "User doesn't prefer tabs", True),
    ("deploys do not run on fridays", "deploys run on fridays at noon after the standup", True),
    # same polarity: they agree
    ("the user wants semicolons", "the user wants semicolons at the end of lines", False),
    # about something else: two of three terms in common are not enough
    ("the user never wants meetings on friday", "the user wants semicolons", False),
    ("never", "not", False),
])
def test_conflicts(first: str, second: str, expected: bool) -> None:
    assert conflicts(first, second) is expected
    assert conflicts(second, first) is expected


Hit = tuple[str, str]  # (semantic type, text)


def settle(hits: list[Hit], k: int) -> list[Hit]:
    return settle_conflicts(hits, k, lambda hit: precedence(hit[0]), lambda hit: hit[1])


def test_the_higher_layer_moves_just_before_what_it_contradicts() -> None:
    hits = [("general", "the cat slept on the windowsill"),
            ("episode", "deploys run on fridays at noon"),
            ("general", "the staging cluster has three nodes"),
            ("fact", "deploys do not run on fridays"),
            ("directive", "the user never wants deploys on fridays at noon")]
    # the fact and the directive agree with each other: they keep their relative order
    assert settle(hits, 3) == [hits[0], hits[3], hits[4], hits[1], hits[2]]


def test_a_conflict_beyond_twice_k_is_left_alone_and_one_layer_costs_nothing() -> None:
    far = [("episode", "deploys run on fridays at noon")] + [("general", f"filler {i}") for i in range(4)] + [
        ("directive", "the user never wants deploys on fridays at noon")]
    assert settle(far, 2) == far
    same_layer = [("episode", "deploys run on fridays"), ("episode", "deploys do not run on fridays")]
    assert settle(same_layer, 2) == same_layer
