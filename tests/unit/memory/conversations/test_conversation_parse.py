"""A conversation file judged whole (node.memory.conversations.parse): the shapes taken, the hostile refused."""

from __future__ import annotations

import json

import pytest

from node.memory.conversations.parse import (
    MAX_CONVERSATION_BYTES,
    MAX_JSON_DEPTH,
    MAX_TURNS,
    ConversationRefused,
    read_conversation,
)
from tests.support.sessions.conversations import jsonl_bytes, locomo_bytes, locomo_conversation


def test_locomo_shape() -> None:
    conversation = read_conversation(locomo_bytes())
    assert conversation.key.startswith("sha256:") and conversation.sessions == 2
    assert conversation.speakers == ("Caroline", "Melanie")
    assert [t.source_id for t in conversation.turns] == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D2:1", "D2:2"]
    photo = conversation.turns[3]
    assert photo.caption == "a painting of a lake sunrise" and photo.session_date == "1:56 pm on 8 May, 2023"
    assert (photo.session, photo.session_index, photo.turn_index) == ("1", 0, 3)
    assert conversation.turns[5].at is not None and conversation.turns[5].at.day == 25


def test_locomo_wrapped_as_a_sample_keeps_its_id_and_events_date() -> None:
    inner = locomo_conversation()
    del inner["session_2_date_time"]
    inner["events_session_2"] = {"date": "25 May, 2023"}
    conversation = read_conversation(json.dumps({"sample_id": "conv-26", "conversation": inner}).encode())
    assert conversation.key == "id:conv-26"
    assert conversation.turns[5].session_date == "25 May, 2023"


def test_jsonl_turns_with_times_sessions_and_default_ids() -> None:
    conversation = read_conversation(jsonl_bytes())
    assert [t.source_id for t in conversation.turns] == ["standup-14:1", "standup-14:2", "standup-21:1"]
    assert [t.session_index for t in conversation.turns] == [0, 0, 1]
    assert conversation.turns[0].session_date == "9:00 am on 14 March, 2024"


def test_a_json_list_and_a_turns_object() -> None:
    turns = [{"speaker": "a", "text": "hello", "id": 7}, {"speaker": "b", "text": "hi", "session": 2}]
    assert [t.source_id for t in read_conversation(json.dumps(turns).encode()).turns] == ["7", "2:1"]
    wrapped = read_conversation(json.dumps({"id": "chat-1", "turns": turns}).encode())
    assert wrapped.key == "id:chat-1" and wrapped.turns[0].at is None


def test_the_key_is_the_digest_of_the_bytes() -> None:
    assert read_conversation(locomo_bytes()).key == read_conversation(locomo_bytes()).key
    assert read_conversation(locomo_bytes()).key != read_conversation(locomo_bytes() + b"\n").key


def _turns(*turns: object) -> bytes:
    return json.dumps(list(turns)).encode()


HOSTILE = {
    "a number": b"42",
    "not json": b"{speaker: a}",
    "empty": b"  \n",
    "no sessions": json.dumps({"speaker_a": "a", "speaker_b": "b"}).encode(),
    "no turns": b"[]",
    "strings for turns": _turns("hello", "hi"),
    "no speaker": _turns({"text": "hello"}),
    "text not a string": _turns({"speaker": "a", "text": {"nested": "x"}}),
    "empty text": _turns({"speaker": "a", "text": "   "}),
    "several conversations": json.dumps([{"sample_id": "1", "conversation": {}}]).encode(),
    "a session that is not a list of turns": json.dumps({"session_1": [1, 2]}).encode(),
    "an unreadable session date": json.dumps({"session_1": [{"speaker": "a", "text": "x"}],
                                              "session_1_date_time": "the day after the flood"}).encode(),
    "duplicate ids": _turns({"speaker": "a", "text": "x", "id": "1"}, {"speaker": "b", "text": "y", "id": "1"}),
    "invalid utf-8": b'[{"speaker": "a", "text": "caf\xe9"}]',
    "a lone surrogate": b'[{"speaker": "a", "text": "x\\ud800y"}]',
    "a speaker of control characters only": b'[{"speaker": "\\u001b[31m\\u0007", "text": "x"}]',
    "a huge turn": _turns({"speaker": "a", "text": "x" * 20_000}),
    "too many turns": _turns(*[{"speaker": "a", "text": "x"}] * (MAX_TURNS + 1)),
    "too many JSONL turns": b"\n".join([b'{"speaker": "a", "text": "x"}'] * (MAX_TURNS + 1)),
    "bad JSONL line": b'{"speaker": "a", "text": "x"}\n{"speaker": \n',
    "too deep": b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
    "deep past the recursion limit": b'{"session_1": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    "too big": b'[{"speaker": "a", "text": "' + b"x" * MAX_CONVERSATION_BYTES + b'"}]',
}


# What the one-line refusal names, for the cases where the reason is not obvious from the case.
SAYS = {
    "a speaker of control characters only": "speaker",
    "a lone surrogate": "surrogate", "invalid utf-8": "not UTF-8", "too deep": "nests deeper",
    "deep past the recursion limit": "nests deeper", "too big": "bytes", "too many turns": "more than",
    "too many JSONL turns": "more than", "duplicate ids": "appears twice", "a huge turn": "longer than",
    "several conversations": "several conversations", "an unreadable session date": "not a date",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_is_refused_with_one_clear_error(name: str) -> None:
    with pytest.raises(ConversationRefused) as refused:
        read_conversation(HOSTILE[name])
    message = str(refused.value)
    assert message and "\n" not in message and len(message) < 300
    assert SAYS.get(name, "") in message


def test_terminal_codes_and_controls_are_stripped_from_speech_and_speakers() -> None:
    data = b'[{"speaker": "a\\u001b[31m", "text": "x\\u0000y \\u001b[1mbold\\u001b[0m"}]'
    turn = read_conversation(data).turns[0]
    assert (turn.speaker, turn.text) == ("a", "xy bold")
