"""The listing lifecycle state machine (node.market.book.lifecycle.decide), case by case."""

from __future__ import annotations

import pytest

from node.market.book.lifecycle import (
    ACCEPT,
    IGNORE_EXPIRED,
    IGNORE_SUPERSEDED,
    IGNORE_WITHDRAWN,
    LISTED,
    WITHDRAWN,
    SkillState,
    decide,
)

NOW = 1_000_000
LIVE = NOW + 10_000


def listed(version: int, seq: int, expires: int = LIVE) -> SkillState:
    return SkillState(LISTED, version, seq, expires)


def withdrawn(version: int, seq: int, expires: int = LIVE) -> SkillState:
    return SkillState(WITHDRAWN, version, seq, expires)


@pytest.mark.parametrize(("current", "incoming", "verdict"), [
    (None, listed(1, 5), ACCEPT),                        # first announcement
    (listed(1, 5), listed(1, 6), ACCEPT),                # refresh / re-price: same version, newer seq
    (listed(1, 6), listed(1, 6), IGNORE_SUPERSEDED),     # the same envelope again
    (listed(1, 6), listed(1, 5), IGNORE_SUPERSEDED),     # an older announcement arriving late
    (listed(1, 5), listed(2, 6), ACCEPT),                # a new version supersedes
    (listed(2, 6), listed(1, 7), IGNORE_SUPERSEDED),     # an old version re-announced later
    (listed(2, 5), withdrawn(2, 6), ACCEPT),             # withdraw
    (listed(2, 5), withdrawn(1, 6), IGNORE_SUPERSEDED),  # withdrawing an older version changes nothing
    (listed(1, 5), withdrawn(1, 4), IGNORE_SUPERSEDED),  # a withdrawal older than the announcement
    (withdrawn(1, 6), listed(1, 5), IGNORE_WITHDRAWN),   # a stale announcement cannot resurrect it
    (withdrawn(1, 6), listed(1, 7), ACCEPT),             # the seller lists it again
    (None, withdrawn(1, 6), ACCEPT),                     # a withdrawal seen before its listing
    (listed(1, 5, expires=NOW), listed(1, 4), ACCEPT),   # an expired state counts as none
    (None, listed(1, 5, expires=NOW), IGNORE_EXPIRED),   # expired on arrival
])
def test_decide(current: SkillState | None, incoming: SkillState, verdict: str) -> None:
    assert decide(current, incoming, NOW) == verdict


def test_count_matches_counts_each_poster_once() -> None:
    import numpy as np

    from node.market.book.bounties import count_matches

    listing = np.array([1.0, 0.0], np.float32)
    bounties = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6], [0.0, 1.0]], np.float32)
    # cosines 1.0, 0.6, 0.8, 0.0 against a threshold of 0.7: rows 0 and 2 match
    assert count_matches(listing, bounties, 0.7) == 2
    assert count_matches(listing, bounties, 0.7, ["a", "b", "a", "c"]) == 1
    assert count_matches(listing, bounties, 0.5, ["a", "b", "a", "c"]) == 2
    assert count_matches(listing, np.zeros((0, 0), np.float32), 0.5) == 0
