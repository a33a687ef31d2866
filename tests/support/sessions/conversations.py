"""Small conversation files in the shapes ``memory ingest --conversation`` accepts (shared by its tests)."""

from __future__ import annotations

import json
from typing import Any


def locomo_conversation() -> dict[str, Any]:
    """A two-session conversation in LoCoMo's file shape (speaker_a/b, session_N, session_N_date_time, qa).

    Session 1 is on Monday 8 May 2023; its second turn says "last Saturday" (6 May 2023).
    """
    return {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! How was your weekend?"},
            {"speaker": "Melanie", "dia_id": "D1:2",
             "text": "I ran a charity race for mental health last Saturday, it was so rewarding."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "That's amazing! I went to an LGBTQ support group."},
            {"speaker": "Melanie", "dia_id": "D1:4", "text": "Look at what I painted!",
             "img_url": ["https://example.invalid/sunrise.jpg"], "blip_caption": "a painting of a lake sunrise",
             "query": "lake sunrise painting"},
            {"speaker": "Caroline", "dia_id": "D1:5", "text": "Gorgeous colours, you should sell it."},
        ],
        "session_2_date_time": "7:55 pm on 25 May, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "My kids started pottery classes yesterday."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "Fun! I'm researching adoption agencies."},
        ],
        "session_3_date_time": "8:00 pm on 1 June, 2023",  # a date without turns, as in LoCoMo's files
        "qa": [{"question": "When did Melanie run a charity race?", "answer": "6 May 2023",
                "evidence": ["D1:2"], "category": 2}],
    }


def locomo_bytes() -> bytes:
    return json.dumps(locomo_conversation()).encode("utf-8")


def jsonl_bytes() -> bytes:
    """The same kind of conversation as JSONL turns with ISO times and no ids."""
    turns = [
        {"speaker": "ana", "text": "The deploy failed two days ago, rollback worked.", "time": "2024-03-14T09:00:00Z",
         "session": "standup-14"},
        {"speaker": "ben", "text": "I'll look into the flaky migration.", "time": "2024-03-14T09:01:00Z",
         "session": "standup-14"},
        {"speaker": "ana", "text": "Migration fixed, shipping next week.", "time": "2024-03-21T09:00:00Z",
         "session": "standup-21"},
    ]
    return "\n".join(json.dumps(turn) for turn in turns).encode("utf-8")
