"""Transcript lines to messages (node.memory.transcripts.parse), per format, from lines written after
the formats' documentation: what is kept, what is dropped, tool calls in one line, results shortened,
terminal codes stripped, secrets redacted and counted, hostile lines skipped whole with a reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from node.memory.transcripts.parse import (
    MAX_RESULT_CHARS,
    Context,
    Format,
    Role,
    Skip,
    detect_format,
    parse_line,
    session_from_key,
    tool_call_text,
)
from tests.support.sessions.transcripts import (
    SESSION,
    claude_code_line,
    codex_rollout,
    jsonl,
    messages_transcript,
)

AT = "2026-03-14T09:00:00.000Z"
CLAUDE = Context(Format.CLAUDE_CODE, SESSION)


def raw(line: dict[str, Any]) -> bytes:
    return json.dumps(line).encode("utf-8")


def claude(kind: str, content: Any, **extra: Any) -> bytes:
    from datetime import datetime

    return raw(claude_code_line(kind, content, at=datetime.fromisoformat(AT.replace("Z", "+00:00")),
                                line_id="11111111-2222-4333-8444-555555555555", **extra))


def texts(line: bytes, context: Context = CLAUDE) -> list[str]:
    return [message.turn_text() for message in parse_line(line, context).messages]


def test_claude_code_user_and_assistant_text() -> None:
    assert texts(claude("user", "Why does the deploy fail?")) == ["(2026-03-14 09:00) user: Why does the deploy fail?"]
    result = parse_line(claude("assistant", [{"type": "thinking", "thinking": "hmm", "signature": "x"},
                                             {"type": "text", "text": "Looking at the logs."}]), CLAUDE)
    assert [(m.role, m.label, m.text) for m in result.messages] == [(Role.ASSISTANT, "assistant", "Looking at the logs.")]
    assert result.dropped == {"thinking": 1}
    message = result.messages[0]
    assert (message.source_id, message.session_id, message.agent) == (
        "11111111-2222-4333-8444-555555555555", SESSION, None)
    assert message.at_ms == 1773478800000


def test_claude_code_tool_calls_are_one_line_with_the_salient_input() -> None:
    calls = [
        ("Bash", {"command": "git status --short", "description": "Show the working tree"}, "git status --short"),
        ("Read", {"file_path": "/home/dev/app/main.py", "limit": 200}, "/home/dev/app/main.py"),
        ("Edit", {"file_path": "/home/dev/app/x.py", "old_string": "a" * 500, "new_string": "b"}, "/home/dev/app/x.py"),
        ("Grep", {"pattern": "TODO", "path": "src"}, "TODO path=src"),
        ("WebFetch", {"url": "https://example.org/doc", "prompt": "summarise"}, "https://example.org/doc"),
        ("Task", {"subagent_type": "Explore", "description": "find the cache", "prompt": "long"},
         "Explore description=find the cache"),
        ("TodoWrite", {"todos": [{"content": "write tests", "status": "pending"},
                                 {"content": "update docs", "status": "pending"}]}, "write tests; update docs"),
        ("mcp__crystalmesh__memory_search", {"query": "deploy", "k": 5}, "query=deploy k=5"),
    ]
    for name, arguments, shown in calls:
        line = claude("assistant", [{"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}])
        assert texts(line) == [f"(2026-03-14 09:00) assistant [tool {name}]: {shown}"]
    assert tool_call_text("shell", {"command": ["bash", "-lc", "ls -la"]}) == "ls -la"
    assert tool_call_text("apply_patch", "*** Begin Patch\n*** Add File: a.py\n*** Update File: b.py\n") == \
        "patch a.py, b.py"


def test_claude_code_tool_results_are_shortened_and_stripped() -> None:
    output = "\n".join(f"\x1b[32mPASSED\x1b[0m test_{number}" for number in range(500)) + "\n== 500 passed =="
    result = parse_line(claude("user", [{"type": "tool_result", "tool_use_id": "t", "content": output}],
                               toolUseResult={"stdout": output}), CLAUDE)
    (message,) = result.messages
    assert message.role is Role.TOOL and message.label == "tool result"
    assert len(message.text) < MAX_RESULT_CHARS + 80
    assert message.text.startswith("PASSED test_0\nPASSED test_1") and message.text.endswith("== 500 passed ==")
    assert "characters" in message.text and "lines left out" in message.text and "\x1b" not in message.text
    error = parse_line(claude("user", [{"type": "tool_result", "tool_use_id": "t", "is_error": True,
                                        "content": [{"type": "text", "text": "No such file"}]}]), CLAUDE)
    assert error.messages[0].label == "tool error" and error.messages[0].text == "No such file"


@pytest.mark.parametrize("line, kind", [
    ({"type": "progress", "data": {"type": "hook_progress"}, "uuid": "p", "sessionId": SESSION}, "progress"),
    ({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}, "file-history-snapshot"),
    ({"type": "system", "subtype": "stop_hook_summary", "content": "ran", "uuid": "s"}, "system"),
    ({"type": "queue-operation", "operation": "enqueue", "sessionId": SESSION}, "queue-operation"),
    ({"type": "user", "isMeta": True, "uuid": "m", "message": {"role": "user", "content": "Caveat: ..."}}, "meta"),
])
def test_claude_code_bookkeeping_is_dropped_and_counted(line: dict[str, Any], kind: str) -> None:
    result = parse_line(raw(line), CLAUDE)
    assert result.messages == [] and result.skipped is None and result.dropped == {kind: 1}


def test_claude_code_sidechains_commands_and_injections() -> None:
    sidechain = claude("assistant", [{"type": "text", "text": "Found it in cache.py"}], sidechain=True,
                       agent_id="a1b2")
    assert texts(sidechain) == ["(2026-03-14 09:00) [subagent a1b2] assistant: Found it in cache.py"]
    assert parse_line(sidechain, CLAUDE).messages[0].agent == "a1b2"
    command = claude("user", "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n"
                             "<command-args>keep the api notes</command-args>")
    assert texts(command) == ["(2026-03-14 09:00) user [command]: /compact keep the api notes"]
    reminder = claude("user", [{"type": "text", "text": "<system-reminder>Plan mode is on.</system-reminder>"},
                               {"type": "text", "text": "Go on"}])
    assert texts(reminder) == ["(2026-03-14 09:00) user: Go on"]
    summary = raw({"type": "summary", "summary": "Fix the flaky upload test", "leafUuid": "abc"})
    assert texts(summary) == ["session summary: Fix the flaky upload test"]
    several = parse_line(claude("assistant", [{"type": "text", "text": "Two calls."},
                                              {"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "ls"}},
                                              {"type": "tool_use", "id": "b", "name": "Bash", "input": {"command": "pwd"}}]),
                         CLAUDE)
    assert [m.source_id[-2:] for m in several.messages] == ["55", "#1", "#2"]  # one id per message, stable


def test_codex_rollout() -> None:
    lines = jsonl(codex_rollout()).splitlines()
    assert detect_format(lines) is Format.CODEX
    context = Context(Format.CODEX, "from-the-file-name")
    kept: list[str] = []
    dropped: dict[str, int] = {}
    for line in lines:
        result = parse_line(line, context)
        if result.session_id:
            context.session_id = result.session_id
        kept += [f"{m.label}: {m.text}" for m in result.messages]
        assert all(m.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53" for m in result.messages)
        for name, count in result.dropped.items():
            dropped[name] = dropped.get(name, 0) + count
    assert kept == [
        "user: Why is the flaky upload test failing on CI?",
        "assistant [tool shell]: pytest -q tests/unit/test_upload.py workdir=/home/dev/project",
        "tool error: F.\nFAILED test_upload.py::test_retry - TimeoutError\nAWS_SECRET_ACCESS_KEY=[redacted secret]",
        "assistant [tool apply_patch]: patch tests/unit/test_upload.py",
        "tool result: Success. Updated the following files:\nM tests/unit/test_upload.py",
        "assistant: The retry test used a 1 s timeout; I raised it to 5 s.",
    ]
    assert dropped == {"session_meta": 1, "injected": 1, "turn_context": 1, "event_msg": 3, "reasoning": 1}


def test_plain_messages() -> None:
    lines = jsonl(messages_transcript()).splitlines()
    assert detect_format(lines) is Format.MESSAGES
    context = Context(Format.MESSAGES, "chat")
    kept = [m.turn_text() for line in lines for m in parse_line(line, context).messages]
    assert kept == ["(2026-03-14 09:00) user: Remind me which port the staging node listens on?",
                    "(2026-03-14 09:00) assistant: Staging listens on port 7411.",
                    "(2026-03-14 09:00) tool result [shell]: LISTEN 0.0.0.0:7411"]
    with_id = raw({"role": "user", "content": "hi", "id": "m-7", "session_id": "s-1", "timestamp": 1773478800})
    message = parse_line(with_id, context).messages[0]
    assert (message.source_id, message.session_id, message.at_ms) == ("m-7", "s-1", 1773478800000)


def test_secrets_are_redacted_and_counted_in_every_part() -> None:
    line = claude("assistant", [
        {"type": "tool_use", "id": "t", "name": "Bash",
         "input": {"command": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                              "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U' https://api.example.org"}},
        {"type": "text", "text": "Your key sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 is set."}])
    result = parse_line(line, CLAUDE)
    assert result.redacted == {"jwt": 1, "api_key": 1}
    joined = " ".join(m.text for m in result.messages)
    assert "eyJhbGci" not in joined and "sk-ant-api03" not in joined and "[redacted jwt]" in joined


@pytest.mark.parametrize("line, reason", [
    (None, Skip.TOO_LONG),
    (b'{"type": "user", "message": {"content": "caf\xe9"}}', Skip.INVALID_UTF8),
    (b"[" * 100 + b"]" * 100, Skip.TOO_DEEP),
    (b'{"a": ' * 40 + b"1" + b"}" * 40, Skip.TOO_DEEP),
    (b"{not json", Skip.NOT_JSON),
    (b'"a string"', Skip.NOT_OBJECT),
    (b'{"type": "user", "uuid": "u", "message": "text, not an object"}', Skip.MALFORMED),
    (b'{"type": "user", "uuid": "u", "message": {"content": 42}}', Skip.MALFORMED),
], ids=["too-long", "utf8", "deep-list", "deep-object", "json", "object", "message", "content"])
def test_a_hostile_line_is_skipped_whole(line: bytes | None, reason: Skip) -> None:
    result = parse_line(line, CLAUDE)
    assert result.skipped is reason and result.messages == []


def test_a_lone_surrogate_or_control_in_text_is_cleaned_not_refused() -> None:
    line = b'{"type": "user", "uuid": "u", "sessionId": "s", "message": {"content": "ok \\ud800 \\u0000done\\u001b[0m"}}'
    assert [m.text for m in parse_line(line, CLAUDE).messages] == ["ok \ufffd done"]


def test_detection_and_session_names() -> None:
    assert detect_format([b"garbage", claude("user", "hi")]) is Format.CLAUDE_CODE
    assert detect_format([b'{"speaker": "a", "text": "b"}']) is None
    assert session_from_key("/x/rollout-2026-03-14T09-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl") == \
        "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert session_from_key("/home/me/chat log.jsonl") == "chat-log"
