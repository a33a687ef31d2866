"""Session transcripts in the three shapes ``memory ingest --transcript`` reads, written from the
formats' documentation (no host's real transcript is copied): shared by the tests and the
transcript-ingest benchmark.

``claude_code_transcript(n)`` makes a Claude Code session of ``n`` conversational lines in the
proportions of a working session (a user prompt, then thinking, text, tool calls and their
results, with progress events, file snapshots and system lines between), deterministic for a
``seed``; at about 2.2 KB a message with its bookkeeping, 1,500 messages make a transcript of over 3 MB.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSION = "5d0c2a8e-3f41-4b7a-9c55-0e6f1a2b3c4d"
START = datetime(2026, 3, 14, 9, 0, 0, tzinfo=UTC)

_PROMPTS = [
    "The deploy script fails on the staging host, can you find out why?",
    "Add a retry with backoff to the upload client and a test for it.",
    "Why does the migration 0042 take so long on the big table?",
    "Rename the config option hnsw_ef to hnsw_ef_search everywhere.",
    "Write a benchmark for the gossip fan-out and put the numbers in the docs.",
]
_COMMANDS = ["git status", "pytest -q tests/unit -x", "ls -la node/memory", "grep -rn ef_search node",
             "python scripts/bench_gossip.py --smoke", "git diff --stat"]
_FILES = ["/home/dev/project/node/memory/facade.py", "/home/dev/project/node/net/gossip.py",
          "/home/dev/project/docs/benchmarks.md", "/home/dev/project/tests/unit/test_upload.py"]


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def claude_code_line(kind: str, content: Any, *, at: datetime, session_id: str = SESSION, line_id: str,
                     parent: str | None = None, sidechain: bool = False, agent_id: str | None = None,
                     **extra: Any) -> dict[str, Any]:
    """One ``user`` or ``assistant`` line with the envelope Claude Code writes around a message."""
    line: dict[str, Any] = {
        "parentUuid": parent, "isSidechain": sidechain, "userType": "external", "cwd": "/home/dev/project",
        "sessionId": session_id, "version": "2.0.14", "gitBranch": "main", "type": kind,
        "message": {"role": kind, "content": content}, "uuid": line_id, "timestamp": _stamp(at)}
    if kind == "assistant":
        line["message"] |= {"id": "msg_" + line_id[:20].replace("-", ""), "type": "message",
                            "model": "claude-sonnet-4-5", "stop_reason": None,
                            "usage": {"input_tokens": 12, "output_tokens": 80}}
        line["requestId"] = "req_" + line_id[:16].replace("-", "")
    if agent_id is not None:
        line["agentId"] = agent_id
    return line | extra


def claude_code_transcript(n_messages: int, *, session_id: str = SESSION, seed: int = 7,
                           start: datetime = START, result_bytes: int = 2400,
                           secret_every: int = 0, sidechain_every: int = 0) -> list[dict[str, Any]]:
    """A Claude Code session of ``n_messages`` user/assistant lines plus its bookkeeping lines.

    ``secret_every``: every Nth tool result also prints an API key; ``sidechain_every``: every
    Nth exchange runs in a subagent's sidechain.
    """
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = [{"type": "summary", "summary": "Fix the staging deploy and add upload retries",
                                    "leafUuid": _uuid(rng)}]
    at = start
    parent: str | None = None
    written = 0
    exchange = 0
    while written < n_messages:
        exchange += 1
        sidechain = bool(sidechain_every) and exchange % sidechain_every == 0
        agent = f"a{exchange:04x}" if sidechain else None

        def add(kind: str, content: Any, sidechain: bool = sidechain, agent: str | None = agent,
                **extra: Any) -> None:
            nonlocal parent, at, written
            at += timedelta(seconds=rng.randint(1, 20))
            line_id = _uuid(rng)
            lines.append(claude_code_line(kind, content, at=at, session_id=session_id, line_id=line_id,
                                          parent=parent, sidechain=sidechain, agent_id=agent, **extra))
            parent = line_id
            written += 1

        if not sidechain or exchange == 1:
            add("user", rng.choice(_PROMPTS) + f" (step {exchange})")
        lines.append({"type": "file-history-snapshot", "messageId": _uuid(rng), "isSnapshotUpdate": False,
                      "snapshot": {"messageId": parent, "trackedFileBackups": {}, "timestamp": _stamp(at)}})
        add("assistant", [{"type": "thinking", "thinking": "Let me look at the code first. " * 8,
                           "signature": "c2lnbmF0dXJl" * 8}])
        add("assistant", [{"type": "text", "text": f"I'll check the repository state (exchange {exchange})."}])
        for _ in range(rng.randint(1, 3)):
            if written >= n_messages:
                break
            tool_id = "toolu_" + _uuid(rng).replace("-", "")[:24]
            tool = rng.choice(["Bash", "Read", "Grep", "Edit"])
            tool_input: dict[str, Any] = {
                "Bash": {"command": rng.choice(_COMMANDS), "description": "Run a command"},
                "Read": {"file_path": rng.choice(_FILES)},
                "Grep": {"pattern": "ef_search", "path": "/home/dev/project/node", "output_mode": "content"},
                "Edit": {"file_path": rng.choice(_FILES), "old_string": "ef = 10", "new_string": "ef = 64"},
            }[tool]
            add("assistant", [{"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input}])
            lines.append({"type": "progress", "data": {"type": "hook_progress", "hookEvent": "PostToolUse",
                                                       "hookName": "PostToolUse:" + tool},
                          "toolUseID": tool_id, "parentToolUseID": tool_id, "sessionId": session_id,
                          "uuid": _uuid(rng), "timestamp": _stamp(at)})
            body = "\n".join(f"{number:6d}\u2192    line {number} of the output, \x1b[32mok\x1b[0m"
                             for number in range(1, result_bytes // 48))
            if secret_every and exchange % secret_every == 0:
                body += "\nOPENAI_API_KEY=sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7" + f"{exchange:06d}"
            add("user", [{"tool_use_id": tool_id, "type": "tool_result", "content": body, "is_error": False}],
                toolUseResult={"stdout": body, "stderr": "", "interrupted": False, "isImage": False})
        if written < n_messages:
            add("assistant", [{"type": "text", "text": f"Done: the change for exchange {exchange} is in place "
                                                       "and the tests pass."}])
        if exchange % 5 == 0:
            lines.append({"type": "system", "subtype": "stop_hook_summary", "content": "Stop hook ran",
                          "level": "info", "sessionId": session_id, "uuid": _uuid(rng), "timestamp": _stamp(at)})
    return lines


def codex_rollout(session_id: str = "0199a213-81c0-7800-8aa1-bbab2a035a53") -> list[dict[str, Any]]:
    """A short Codex CLI rollout: session_meta, turn_context, response items and their event echoes."""
    def line(seconds: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": _stamp(START + timedelta(seconds=seconds)), "type": kind, "payload": payload}

    return [
        line(0, "session_meta", {"id": session_id, "timestamp": _stamp(START), "cwd": "/home/dev/project",
                                 "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": None,
                                 "git": {"branch": "main"}}),
        line(0, "response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/dev/project</cwd>\n"
                                           "</environment_context>"}]}),
        line(1, "turn_context", {"cwd": "/home/dev/project", "approval_policy": "on-request",
                                 "sandbox_policy": {"mode": "workspace-write"}, "model": "gpt-5-codex"}),
        line(1, "response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Why is the flaky upload test failing on CI?"}]}),
        line(1, "event_msg", {"type": "user_message", "message": "Why is the flaky upload test failing on CI?",
                              "images": []}),
        line(2, "response_item", {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": "**Inspecting the test**"}], "content": None,
            "encrypted_content": "gAAAAABo" + "x" * 40}),
        line(3, "response_item", {"type": "function_call", "name": "shell", "arguments": json.dumps(
            {"command": ["bash", "-lc", "pytest -q tests/unit/test_upload.py"], "workdir": "/home/dev/project"}),
            "call_id": "call_A1"}),
        line(5, "response_item", {"type": "function_call_output", "call_id": "call_A1", "output": json.dumps(
            {"output": "\x1b[31mF\x1b[0m.\nFAILED test_upload.py::test_retry - TimeoutError\n"
                       "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY1\n",
             "metadata": {"exit_code": 1, "duration_seconds": 1.2}})}),
        line(5, "event_msg", {"type": "token_count", "info": None}),
        line(6, "response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_B2",
                                  "input": "*** Begin Patch\n*** Update File: tests/unit/test_upload.py\n"
                                           "@@\n-    timeout=1\n+    timeout=5\n*** End Patch\n"}),
        line(7, "response_item", {"type": "custom_tool_call_output", "call_id": "call_B2",
                                  "output": "Success. Updated the following files:\nM tests/unit/test_upload.py"}),
        line(8, "response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "The retry test used a 1 s timeout; I raised it to 5 s."}]}),
        line(8, "event_msg", {"type": "agent_message", "message": "The retry test used a 1 s timeout; "
                                                                  "I raised it to 5 s."}),
    ]


def messages_transcript() -> list[dict[str, Any]]:
    """A plain messages JSONL: ``{role, content, timestamp}`` a line."""
    return [
        {"role": "system", "content": "You are a helpful assistant.", "timestamp": "2026-03-14T09:00:00Z"},
        {"role": "user", "content": "Remind me which port the staging node listens on?",
         "timestamp": "2026-03-14T09:00:05Z"},
        {"role": "assistant", "content": [{"type": "text", "text": "Staging listens on port 7411."}],
         "timestamp": "2026-03-14T09:00:07Z"},
        {"role": "tool", "name": "shell", "content": "LISTEN 0.0.0.0:7411", "timestamp": "2026-03-14T09:00:09Z"},
    ]


def jsonl(lines: Iterable[dict[str, Any]]) -> bytes:
    """Lines as a transcript file holds them: one JSON object a line, each ending in a newline."""
    return b"".join(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n" for line in lines)


def write_transcript(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    """Write ``lines`` as JSONL to ``path`` (streamed: a big transcript is never one string)."""
    with path.open("wb") as file:
        for line in lines:
            file.write(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
    return path
