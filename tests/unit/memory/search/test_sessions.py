"""Turns ranked with their session (node.memory.search.sessions): pure functions, no store."""

from __future__ import annotations

from node.memory.search.sessions import SessionParams, is_conversation, with_sessions


def ranked(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda rowid: scores[rowid], reverse=True)


def test_a_turn_whose_session_holds_more_evidence_goes_first() -> None:
    # Turn 1 scores best alone; turns 2 and 3 are one session that two candidates point to.
    scores = [(1, 1.0), (2, 0.95), (3, 0.9), (4, 0.2)]
    sessions = {1: "s1", 2: "s2", 3: "s2", 4: "s3"}
    assert ranked(with_sessions(scores, sessions)) == [2, 3, 1, 4]
    assert ranked(with_sessions(scores, sessions, SessionParams(weight=0.0))) == [1, 2, 3, 4]


def test_with_depth_one_a_session_is_its_best_turn() -> None:
    scores = [(1, 1.0), (2, 0.95), (3, 0.9)]
    blended = with_sessions(scores, {1: "s1", 2: "s2", 3: "s2"}, SessionParams(weight=0.5, depth=1))
    assert ranked(blended) == [1, 2, 3]
    assert blended[1] == 1.0


def test_candidates_that_are_no_turns_keep_their_order_and_ratios() -> None:
    scores = [(1, 0.8), (2, 0.5), (3, 0.1)]
    assert with_sessions(scores, {}) == dict(scores)  # no turn at all: untouched
    blended = with_sessions([*scores, (9, 0.3)], {9: "s"})
    assert ranked(blended)[:2] == [1, 2]
    assert abs(blended[1] / blended[2] - 0.8 / 0.5) < 1e-9
    assert abs(blended[2] / blended[3] - 0.5 / 0.1) < 1e-9


def test_negative_and_zero_scores_do_not_divide_by_zero() -> None:
    assert with_sessions([(1, 0.0), (2, 0.0)], {1: "s", 2: "s"}) == {1: 0.0, 2: 0.0}
    assert with_sessions([], {1: "s"}) == {}


def test_a_search_is_a_conversations_when_most_candidates_are_turns() -> None:
    assert is_conversation(50, 100)
    assert not is_conversation(49, 100)
    assert not is_conversation(0, 0)
