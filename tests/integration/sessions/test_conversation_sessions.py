"""Search ranks a conversation's turns with their session (node.memory.search.sessions), on a real
store, index and embedder (hashing): the session with more evidence gives the top hit, a store of
notes ranks exactly as before, and crafted turn rows cannot break a search."""

from __future__ import annotations

import json
from typing import Any

import pytest

from node.memory import SearchRequest, ingest_conversation
from node.memory.facade import Memory
from node.memory.search import pipeline

FILLER = ["We talked about the weather and the garden today.", "The train to the city was late again.",
          "I baked bread with rosemary."]
QUESTION = "Which glaze did Melanie use on the bowl from pottery class?"


def conversation() -> bytes:
    """Session 1 has one turn sharing the question's words; session 2 holds the answer over two turns."""
    data: dict[str, Any] = {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Melanie", "dia_id": "D1:1", "text": "The pottery shop had a blue glaze sale."},
            {"speaker": "Caroline", "dia_id": "D1:2", "text": "Nice, I am reading a novel about sailing."},
            {"speaker": "Melanie", "dia_id": "D1:3", "text": "My cat knocked a vase off the shelf."},
        ],
        "session_2_date_time": "7:55 pm on 25 May, 2023",
        "session_2": [
            {"speaker": "Caroline", "dia_id": "D2:1", "text": "How was the class on Friday?"},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "I made a bowl in my pottery class with my kids."},
            {"speaker": "Melanie", "dia_id": "D2:3", "text": "We painted the bowl with a glaze we mixed ourselves."},
        ],
    }
    for number in range(3, 8):  # other sessions, so that most candidates are turns of unrelated talk
        data[f"session_{number}_date_time"] = f"1:00 pm on {number} June, 2023"
        data[f"session_{number}"] = [{"speaker": "Caroline", "dia_id": f"D{number}:{index}", "text": text}
                                     for index, text in enumerate(FILLER, start=1)]
    return json.dumps(data).encode()


def without_sessions(memory: Memory, query: str, k: int = 4) -> list[pipeline.SearchHit]:
    """The same search with no session lookup: fusion for a store of notes, no session blend."""
    return pipeline.search(memory.store, memory.index, memory.embed, memory.hormones,
                           SearchRequest(query, k=k, record_access=False), sessions=None)


def test_the_session_holding_the_answer_gives_the_top_hit(memory: Memory) -> None:
    ingest_conversation(memory, conversation())
    hits = memory.search(SearchRequest(QUESTION, k=4, record_access=False))
    assert [hit.turn["source_id"] for hit in hits[:2] if hit.turn] == ["D2:2", "D2:3"]
    # Scored alone, the other session's turn that shares "pottery" and "glaze" comes first.
    alone = without_sessions(memory, QUESTION)
    assert alone[0].crystal.text.endswith("The pottery shop had a blue glaze sale.")


def test_a_store_of_notes_ranks_exactly_as_without_sessions(memory: Memory) -> None:
    for text in ["The pottery shop had a blue glaze sale.", "I made a bowl in my pottery class.",
                 "We painted the bowl with a glaze.", *FILLER]:
        memory.add(text)
    hits = memory.search(SearchRequest(QUESTION, k=6, record_access=False))
    alone = without_sessions(memory, QUESTION, k=6)
    assert [hit.crystal.id for hit in hits] == [hit.crystal.id for hit in alone]
    # Equal up to the recency weight, which moves with the clock between the two searches.
    assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in alone], rel=1e-6)


def test_crafted_turn_rows_change_an_order_never_the_result(memory: Memory) -> None:
    ingest_conversation(memory, conversation())
    before = {hit.crystal.id for hit in memory.search(SearchRequest(QUESTION, k=30, record_access=False))}
    # A data dir is a file: its turn rows may hold anything SQLite stores.
    memory.db.execute("UPDATE conversation_turns SET session = CAST(x'00ff' AS BLOB) WHERE source_id LIKE 'D2:%'")
    memory.db.execute("UPDATE conversation_turns SET namespace = 7, conversation = 2.5 WHERE source_id LIKE 'D1:%'")
    after = {hit.crystal.id for hit in memory.search(SearchRequest(QUESTION, k=30, record_access=False))}
    assert after == before
