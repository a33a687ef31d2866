"""Conversations ingested into a real store and index (node.memory.conversations): one memory per turn,
traced back to its file, neighbours, idempotent, and a refused file leaves nothing behind."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from node.crystals import LifespanPolicy, Origin
from node.memory import (
    ConversationRefused,
    SearchRequest,
    delete,
    ingest_conversation,
    neighbours,
    update_from_request,
)
from node.memory.facade import Memory
from node.memory.search import MemoryInputError
from tests.support.sessions.conversations import jsonl_bytes, locomo_bytes

HOSTILE = [
    b'[{"speaker": "a", "text": "fine"}, {"speaker": "b", "text": "x\\ud800"}]',
    b'[{"speaker": "a", "text": "fine"}, {"speaker": "b", "text": "caf\xe9"}]',
    b'[{"speaker": "a", "text": "fine"}, {"speaker": "\\u0007\\u001b", "text": "who said it?"}]',
    b'[{"speaker": "a", "text": "fine"}, {"text": "no speaker"}]',
    b'[{"speaker": "a", "text": "fine"}, ' + b"[" * 5000 + b"]" * 5000 + b"]",
    b'[{"speaker": "a", "text": "fine"}]' + b" " * (8 * 1024 * 1024),
]


def state(memory: Memory) -> tuple[int, int, int]:
    """Crystals, turn rows and indexed vectors: what a refused ingest must leave as it was."""
    turns = memory.db.one("SELECT COUNT(*) FROM conversation_turns")
    return memory.store.stats()["total"], int(turns[0]) if turns else 0, memory.index.count


def search(memory: Memory, query: str, k: int = 3) -> list[dict[str, Any]]:
    return [hit.to_dict() for hit in memory.search(SearchRequest(query, k=k, record_access=False))]


def test_round_trip_each_turn_a_traceable_memory(memory: Memory) -> None:
    report = ingest_conversation(memory, locomo_bytes())
    assert (report["turns"], report["added"], report["sessions"]) == (7, 7, 2)
    assert state(memory) == (7, 7, 7)

    hit = search(memory, "charity race for mental health")[0]
    assert hit["source_id"] == "D1:2"
    assert hit["turn"]["speaker"] == "Melanie" and hit["turn"]["session"] == "1"
    assert hit["turn"]["session_date"] == "1:56 pm on 8 May, 2023"
    text = hit["crystal"]["text"]
    assert text == ("(1:56 pm on 8 May, 2023) Melanie: I ran a charity race for mental health last Saturday, "
                    "it was so rewarding. [last Saturday = 6 May 2023]")
    # valid_from: the session's time plus one second per turn, so the order survives
    assert hit["crystal"]["validFrom"] == 1683554160000 + 1000
    crystal = memory.get(hit["id"])
    assert crystal.origin is Origin.SESSION and crystal.governance.lifespan_policy is LifespanPolicy.PERMANENT

    photo = search(memory, "lake sunrise painting")[0]
    assert photo["source_id"] == "D1:4" and photo["crystal"]["text"].endswith(
        "Look at what I painted! [shares a painting of a lake sunrise]")

    around = neighbours(memory, hit["id"], window=1)
    assert [t["source_id"] for t in around["turns"]] == ["D1:1", "D1:2", "D1:3"]
    assert [t["hit"] for t in around["turns"]] == [False, True, False]
    assert [t["source_id"] for t in neighbours(memory, photo["id"], window=1)["turns"]] == ["D1:3", "D1:4", "D1:5"]
    assert [t["source_id"] for t in neighbours(memory, photo["id"], window=0)["turns"]] == ["D1:4"]
    assert [t["source_id"] for t in neighbours(memory, hit["id"], window=20)["turns"]] == [
        "D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]  # never past the session


def test_re_ingesting_the_same_file_adds_nothing(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_conversation(memory, locomo_bytes())
    before = state(memory)

    def embed_again(texts: Any) -> Any:
        raise AssertionError(f"re-ingesting embedded {len(texts)} turns again")

    with monkeypatch.context() as patched:  # the stored turns are known before any work is done
        patched.setattr(memory, "embed_windows", embed_again)
        again = ingest_conversation(memory, locomo_bytes())
    assert (again["added"], again["already_stored"], again["new_crystals"]) == (0, 7, 0)
    assert state(memory) == before
    other = ingest_conversation(memory, locomo_bytes(), namespace="user:caroline")  # another namespace is another place
    assert other["added"] == 7 and state(memory)[0] == 14


def test_jsonl_turns_and_their_relative_dates(memory: Memory) -> None:
    assert ingest_conversation(memory, jsonl_bytes())["added"] == 3
    hit = search(memory, "deploy failed rollback")[0]
    assert hit["source_id"] == "standup-14:1"
    assert hit["crystal"]["validFrom"] == 1710406800000  # the turn's own time, 2024-03-14T09:00:00Z
    assert hit["crystal"]["text"].endswith("[two days ago = 12 March 2024]")
    assert search(memory, "shipping")[0]["crystal"]["text"].endswith("[next week = week of 25 March 2024]")


def test_a_later_version_of_a_turn_keeps_its_origin(memory: Memory) -> None:
    ingest_conversation(memory, locomo_bytes())
    hit = search(memory, "adoption agencies")[0]
    update_from_request(memory, hit["id"], {"text": "Caroline is researching adoption agencies (corrected)"})
    again = search(memory, "adoption agencies corrected")[0]
    assert again["id"] != hit["id"] and again["source_id"] == "D2:2"


def test_neighbours_of_what_is_not_a_turn_is_refused(memory: Memory) -> None:
    plain = memory.add("a plain note, not said in any conversation")
    with pytest.raises(MemoryInputError, match="not a conversation turn"):
        neighbours(memory, plain.id)
    assert search(memory, "plain note")[0]["source_id"] is None


@pytest.mark.parametrize("data", HOSTILE, ids=["surrogate", "utf8", "control-only-speaker", "shape", "deep", "huge"])
def test_a_hostile_file_stores_nothing(memory: Memory, data: bytes) -> None:
    ingest_conversation(memory, jsonl_bytes())
    before = state(memory)
    with pytest.raises(ConversationRefused):
        ingest_conversation(memory, data)
    assert state(memory) == before


def test_terminal_codes_in_a_turn_are_stripped_not_refused(memory: Memory) -> None:
    """A pasted test run's colours (U+001B ...) and a bell must not cost the whole session."""
    data = (b'[{"speaker": "ana", "text": "the run said \\u001b[32mPASSED\\u001b[0m\\u0007 on retry"},'
            b' {"speaker": "ben", "text": "good"}]')
    assert ingest_conversation(memory, data)["added"] == 2
    texts = [memory.get(row["crystal_id"]).text for row in memory.db.all("SELECT crystal_id FROM conversation_turns")]
    assert any(text.endswith("ana: the run said PASSED on retry") for text in texts)
    assert not any(ch in text for text in texts for ch in "\x1b\x07")


def test_a_failure_while_writing_leaves_nothing_half_stored(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crystals and their turn rows share one transaction, and nothing is indexed before it commits."""
    original = memory.store.add_many
    calls: list[int] = []

    def add_then_fail(crystals: Any) -> Any:
        results = original(crystals)
        calls.append(len(results))
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(memory.store, "add_many", add_then_fail)
    with pytest.raises(sqlite3.OperationalError):
        ingest_conversation(memory, locomo_bytes())
    assert calls == [7]
    assert state(memory) == (0, 0, 0)
    monkeypatch.undo()
    assert ingest_conversation(memory, locomo_bytes())["added"] == 7  # and it can be done again


def test_as_of_a_date_finds_what_had_been_said_by_then(memory: Memory) -> None:
    """``validFrom`` is the session's time, so the temporal stage (search ``as_of``) sees the conversation's time."""
    ingest_conversation(memory, locomo_bytes())
    between = 1684540800000  # 20 May 2023: after session 1 (8 May), before session 2 (25 May)
    then = memory.search(SearchRequest("pottery classes adoption agencies charity race", k=10,
                                       record_access=False, as_of_ms=between))
    assert {hit.turn["session"] for hit in then if hit.turn} == {"1"}
    now = memory.search(SearchRequest("pottery classes adoption agencies charity race", k=10, record_access=False))
    assert {hit.turn["session"] for hit in now if hit.turn} == {"1", "2"}


def test_a_forgotten_turn_leaves_its_session_and_its_row(memory: Memory) -> None:
    ingest_conversation(memory, locomo_bytes())
    hit = search(memory, "charity race")[0]
    middle = search(memory, "LGBTQ support group")[0]
    delete(memory, middle["id"])
    assert [t["source_id"] for t in neighbours(memory, hit["id"], window=1)["turns"]] == ["D1:1", "D1:2"]
    memory.consolidate()  # purges the tombstone; its turn row goes with it
    assert state(memory) == (6, 6, memory.index.count)


@pytest.mark.parametrize("kind", ["skill", "task_pattern", "warning"])
def test_turns_are_not_skills_nor_warnings(memory: Memory, kind: str) -> None:
    with pytest.raises(ConversationRefused, match="not a"):
        ingest_conversation(memory, jsonl_bytes(), semantic_type=kind)
    assert state(memory) == (0, 0, 0)
    assert ingest_conversation(memory, jsonl_bytes(), semantic_type="episode")["added"] == 3
