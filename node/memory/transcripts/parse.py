"""One transcript line becomes zero or more messages worth keeping, or is skipped with a reason.

Three formats (docs/memory.md, "Sessions"), told apart by :func:`detect_format`:

* ``claude-code``: Claude Code's session JSONL (``~/.claude/projects/<project>/<session>.jsonl``):
  lines ``{"type": "user"|"assistant", "uuid", "parentUuid", "sessionId", "timestamp",
  "isSidechain", "agentId", "message": {"role", "content": str | [blocks]}}`` with blocks
  ``text``, ``thinking``, ``tool_use {name, input}``, ``tool_result {content, is_error}``,
  ``image``; besides them ``summary``, ``system``, ``progress``, ``file-history-snapshot``
  and other bookkeeping lines.
* ``codex``: Codex CLI's rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl``):
  ``{"timestamp", "type", "payload"}`` with ``session_meta`` (the session id), ``response_item``
  (``message``, ``function_call``, ``function_call_output``, ``custom_tool_call``,
  ``reasoning``, ...), ``event_msg`` (the TUI's echo of the same items) and ``turn_context``.
* ``messages``: one ``{"role", "content", "timestamp"[, "id"][, "session_id"]}`` a line.

What is kept: user and assistant text; a tool call as one line (tool name and its salient
input: the command, the path, the pattern); a tool result shortened to its head and tail.
What is dropped (counted by kind): thinking and reasoning, progress and hook events,
file snapshots, system bookkeeping, injected context (``<system-reminder>``,
``<environment_context>``), and the display echo of items already kept. Sidechain
(subagent) messages are kept and marked with their agent.

A line is judged whole before any of its messages is used: too long, not UTF-8, nested
deeper than ``MAX_JSON_DEPTH`` (a linear scan before ``json.loads``, which could
otherwise overflow the C stack since py_ecc raises the recursion limit), not JSON, or
not an object: the line is skipped with that reason and nothing of it is kept. Every
message's text is stripped of terminal codes (``clean``) and of secrets
(``governance.redact_secrets``) here, before anything can store it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import PurePath
from typing import Any

from node.crystals import governance
from node.memory.conversations import shorten, strip_controls, tidy
from node.memory.transcripts.lines import MAX_LINE_BYTES
from protocol.codec import json_too_deep

MAX_JSON_DEPTH = 32  # Claude Code nests about 8 deep; a tool's structured result a little more
MAX_TEXT_CHARS = 16_384  # what someone wrote (user or assistant): kept nearly whole
MAX_RESULT_CHARS = 1_200  # a tool's output: its head and tail say what ran and how it ended
MAX_INPUT_CHARS = 400  # the salient input of a tool call
MAX_ID_CHARS = 128
DETECT_LINES = 64  # lines looked at to tell the format


class Format(StrEnum):
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    MESSAGES = "messages"


class Skip(StrEnum):
    """Why a line was skipped whole."""

    TOO_LONG = "too_long"
    INVALID_UTF8 = "invalid_utf8"
    TOO_DEEP = "too_deep"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    MALFORMED = "malformed"  # an object of the format whose fields have the wrong types


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SUMMARY = "summary"


@dataclass(frozen=True)
class Message:
    """One message to store: who, what (rendered, cleaned and redacted), when, where from."""

    source_id: str  # the host's message id (Claude Code's uuid), else a digest of the line
    role: Role
    label: str  # "user", "assistant [tool Bash]", "tool result", ...
    text: str
    at_ms: int | None
    session_id: str
    agent: str | None = None  # a sidechain's agent id ("" when the host gives none); None on the main thread

    def turn_text(self) -> str:
        """What is stored and searched: ``(<time>) [subagent <id>] <label>: <text>``."""
        prefix = ""
        if self.at_ms is not None:
            prefix = datetime.fromtimestamp(self.at_ms / 1000, UTC).strftime("(%Y-%m-%d %H:%M) ")
        if self.agent is not None:
            prefix += f"[subagent {self.agent}] " if self.agent else "[subagent] "
        return f"{prefix}{self.label}: {self.text}"


@dataclass
class LineResult:
    """What one line gave: messages, or a skip reason; what was dropped and redacted."""

    messages: list[Message] = field(default_factory=list)
    skipped: Skip | None = None
    dropped: Counter[str] = field(default_factory=Counter)
    redacted: Counter[str] = field(default_factory=Counter)
    session_id: str | None = None  # a session id this line declares (Codex's session_meta)


class MalformedLine(ValueError):
    """A field of a line has a type the format does not allow."""


@dataclass
class Context:
    """What a line is read against: the format and the session it belongs to when the line does
    not say (Codex names it once, in ``session_meta``; a messages file maybe never)."""

    format: Format
    session_id: str


# --- decoding --------------------------------------------------------------------------------
def decode_line(raw: bytes | None) -> tuple[dict[str, Any] | None, Skip | None]:
    """A line's JSON object, or why it is skipped (``raw`` None: over the size limit)."""
    if raw is None or len(raw) > MAX_LINE_BYTES + 1:
        return None, Skip.TOO_LONG
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, Skip.INVALID_UTF8
    if json_too_deep(raw, MAX_JSON_DEPTH):
        return None, Skip.TOO_DEEP
    try:
        value = json.loads(text)  # depth bounded above: cannot recurse past MAX_JSON_DEPTH
    except ValueError:
        return None, Skip.NOT_JSON
    if not isinstance(value, dict):
        return None, Skip.NOT_OBJECT
    return value, None


_CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "system", "progress", "file-history-snapshot",
                           "attachment", "queue-operation"})
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


def format_of(value: dict[str, Any]) -> Format | None:
    """The format one decoded line belongs to, if it says."""
    kind = value.get("type")
    if kind in _CODEX_TYPES and "payload" in value:
        return Format.CODEX
    if kind in _CLAUDE_TYPES and ("uuid" in value or "sessionId" in value or "leafUuid" in value
                                  or "messageId" in value):
        return Format.CLAUDE_CODE
    if "role" in value and "content" in value and "payload" not in value:
        return Format.MESSAGES
    return None


def detect_format(lines: list[bytes]) -> Format | None:
    """The format of a file from its first lines (the first that says decides)."""
    for raw in lines[:DETECT_LINES]:
        value, _ = decode_line(raw)
        if value is not None and (found := format_of(value)) is not None:
            return found
    return None


def declared_session(lines: list[bytes], format: Format) -> str | None:
    """The session id the first lines declare: Claude Code's ``sessionId`` (a title line before it
    has none), Codex's ``session_meta``; a messages file's ``session_id``."""
    field_name = {Format.CLAUDE_CODE: b'"sessionId"', Format.CODEX: b'"session_meta"',
                  Format.MESSAGES: b'"session_id"'}[format]
    for raw in lines[:DETECT_LINES]:
        if field_name not in raw:
            continue
        value, _ = decode_line(raw)
        if value is None:
            continue
        if format is Format.CODEX:
            payload = value.get("payload")
            found = _label(payload.get("id")) if isinstance(payload, dict) else None
        else:
            found = _label(value.get("sessionId" if format is Format.CLAUDE_CODE else "session_id"))
        if found:
            return found
    return None


def session_from_key(transcript: str) -> str:
    """A session id from the transcript's name when its lines give none: Claude Code names a
    file ``<session>.jsonl``, Codex ``rollout-<time>-<session uuid>.jsonl``."""
    stem = PurePath(transcript).stem
    found = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", stem)
    if found:
        return found.group()
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", stem).strip("-.")[:64]
    return cleaned or "transcript-" + hashlib.sha256(transcript.encode("utf-8", "replace")).hexdigest()[:16]


# --- shared helpers --------------------------------------------------------------------------
def _label(value: Any, limit: int = MAX_ID_CHARS) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = strip_controls(value).strip()
    return value[:limit] or None


def _time_ms(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value  # epoch ms or s
        return int(seconds * 1000) if 0 <= seconds < 1e11 else None
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def _line_id(raw: bytes) -> str:
    return "h:" + hashlib.sha256(raw).hexdigest()[:24]


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a bare string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list):
        raise MalformedLine("content is neither text nor a list of blocks")
    return [block for block in content if isinstance(block, dict)]


def _block_text(content: Any) -> str:
    """The text of a tool result's content (a string, or blocks of text and images)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in _blocks(content) if isinstance(content, list) else []:
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind in ("image", "input_image"):
            parts.append("[image]")
    if not parts and content is not None and not isinstance(content, list):
        parts.append(json.dumps(content, ensure_ascii=False)[:MAX_RESULT_CHARS * 2])
    return "\n".join(parts)


_INJECTED = re.compile(r"<(system-reminder|local-command-caveat)>.*?</\1>", re.DOTALL)
_SCAFFOLD = re.compile(r"^\s*(?:<(?:environment_context|user_instructions|permissions instructions|"
                       r"user_shell_command)\b|# AGENTS\.md instructions)", re.IGNORECASE)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
_COMMAND_OUT = re.compile(r"<local-command-(?:stdout|stderr)>(.*?)</local-command-(?:stdout|stderr)>", re.DOTALL)
_TAG_LINES = re.compile(r"</?command-(?:message|name|args)>")


def _user_text(text: str) -> tuple[str, str] | None:
    """(label, text) of what a user line says, the harness's injections removed; None if nothing is left."""
    text = _INJECTED.sub("", text)
    command = _COMMAND.search(text)
    if command:
        arguments = _COMMAND_ARGS.search(text)
        said = command.group(1).strip() + (" " + arguments.group(1).strip() if arguments else "")
        return "user [command]", said.strip()
    output = _COMMAND_OUT.search(text)
    if output:
        body = tidy(output.group(1))
        return ("command output", shorten(body, MAX_RESULT_CHARS)) if body else None
    text = tidy(_TAG_LINES.sub("", text))
    return ("user", shorten(text, MAX_TEXT_CHARS)) if text else None


# --- tool calls ------------------------------------------------------------------------------
# The one input that says what a call did, by tool (Claude Code's names, then Codex's).
_SALIENT = {
    "Bash": ("command",), "BashOutput": ("bash_id",), "KillShell": ("shell_id",),
    "Read": ("file_path",), "Write": ("file_path",), "Edit": ("file_path",), "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",), "NotebookRead": ("notebook_path",),
    "Glob": ("pattern", "path"), "Grep": ("pattern", "path", "glob"), "LS": ("path",),
    "WebFetch": ("url",), "WebSearch": ("query",), "Task": ("subagent_type", "description"),
    "Agent": ("subagent_type", "description"), "Skill": ("skill", "command"), "SlashCommand": ("command",),
    "ExitPlanMode": ("plan",), "AskUserQuestion": ("questions",),
    "shell": ("command", "workdir"), "exec_command": ("cmd", "command", "workdir"),
    "local_shell": ("command",), "update_plan": ("plan",), "view_image": ("path",),
    "write_stdin": ("chars",),
}
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash"})
_PATCH_FILES = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


def _argv(value: Any) -> str | None:
    """A command as one string; ``["bash", "-lc", "cmd"]`` is ``cmd``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        if len(value) == 3 and value[0] in _SHELLS and value[1] in ("-lc", "-c"):
            return value[2]
        return " ".join(value)
    return None


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return json.dumps(value)
    if isinstance(value, list):
        if all(isinstance(item, dict) for item in value):  # todos, plan steps, questions
            texts = [next((str(item[key]) for key in ("content", "step", "question", "text", "title")
                           if isinstance(item.get(key), str)), "") for item in value]
            return "; ".join(text for text in texts if text) or f"{len(value)} items"
        return _argv(value)
    return None


def tool_call_text(name: str, arguments: Any) -> str:
    """A tool call's salient input, one line (the command, the path, the pattern...)."""
    if isinstance(arguments, str):
        files = _PATCH_FILES.findall(arguments)
        if files:  # Codex's apply_patch: the files it touches
            return "patch " + ", ".join(path.strip() for path in files)
        return arguments
    if not isinstance(arguments, dict):
        return ""
    keys = _SALIENT.get(name)
    if name == "TodoWrite" and isinstance(arguments.get("todos"), list):
        keys = ("todos",)
    parts: list[str] = []
    if keys:
        for key in keys:
            value = arguments.get(key)
            text = _argv(value) if key in ("command", "cmd") else _scalar(value)
            if text:
                parts.append(text if not parts else f"{key}={text}")
    if not parts:  # an unknown (MCP) tool: its first few plain inputs
        for key, value in list(arguments.items())[:4]:
            text = _scalar(value)
            if text is not None:
                parts.append(f"{key}={text}")
    return " ".join(parts)


def _tool_call(name: Any, arguments: Any) -> tuple[str, str]:
    tool = _label(name, 80) or "tool"
    text = " ".join(strip_controls(tool_call_text(tool, arguments)).split())
    return f"assistant [tool {tool}]", shorten(text, MAX_INPUT_CHARS)


def _tool_result(content: Any, is_error: bool) -> tuple[str, str] | None:
    body = tidy(_block_text(content))
    if not body:
        body = "(no output)"
    return ("tool error" if is_error else "tool result"), shorten(body, MAX_RESULT_CHARS)


# --- the formats -----------------------------------------------------------------------------
Part = tuple[str, str, Role]  # label, text, role


def _claude_parts(value: dict[str, Any], result: LineResult) -> list[Part]:
    kind = value.get("type")
    if kind == "summary":
        summary = value.get("summary")
        return [("session summary", tidy(summary), Role.SUMMARY)] if isinstance(summary, str) and summary.strip() else []
    if kind == "system" and value.get("subtype") == "local_command" and isinstance(value.get("content"), str):
        said = _user_text(value["content"])
        return [(said[0], said[1], Role.USER)] if said else []
    if kind not in ("user", "assistant"):
        result.dropped[str(kind)[:40] if kind is not None else "unknown"] += 1
        return []
    if value.get("isMeta") is True:
        result.dropped["meta"] += 1
        return []
    message = value.get("message")
    if not isinstance(message, dict):
        raise MalformedLine("a user or assistant line without its message")
    parts: list[Part] = []
    if value.get("isCompactSummary") is True:
        text = tidy(_block_text(message.get("content")))
        return [("session summary", shorten(text, MAX_TEXT_CHARS), Role.SUMMARY)] if text else []
    for block in _blocks(message.get("content")):
        block_type = block.get("type")
        if block_type == "text" and isinstance(block.get("text"), str):
            if kind == "user":
                said = _user_text(block["text"])
                if said is None:
                    result.dropped["injected"] += 1
                    continue
                parts.append((said[0], said[1], Role.USER))
            else:
                text = tidy(block["text"])
                if text:
                    parts.append(("assistant", shorten(text, MAX_TEXT_CHARS), Role.ASSISTANT))
        elif block_type == "tool_use":
            label, text = _tool_call(block.get("name"), block.get("input"))
            parts.append((label, text, Role.ASSISTANT))
        elif block_type == "tool_result":
            shown = _tool_result(block.get("content"), block.get("is_error") is True)
            if shown:
                parts.append((shown[0], shown[1], Role.TOOL))
        elif block_type == "image":
            parts.append(("user" if kind == "user" else "assistant", "[image]",
                          Role.USER if kind == "user" else Role.ASSISTANT))
        else:  # thinking, redacted_thinking, server tool blocks, documents...
            result.dropped[str(block_type)[:40]] += 1
    return parts


def _codex_parts(value: dict[str, Any], result: LineResult, context: Context) -> list[Part]:
    kind = value.get("type")
    payload = value.get("payload")
    if kind == "session_meta":
        if isinstance(payload, dict) and (found := _label(payload.get("id"))):
            result.session_id = found
        result.dropped["session_meta"] += 1
        return []
    if kind == "compacted" and isinstance(payload, dict) and isinstance(payload.get("message"), str):
        text = tidy(payload["message"])
        return [("session summary", shorten(text, MAX_TEXT_CHARS), Role.SUMMARY)] if text else []
    if kind != "response_item":  # event_msg echoes the response items; turn_context is settings
        result.dropped[str(kind)[:40] if kind is not None else "unknown"] += 1
        return []
    if not isinstance(payload, dict):
        raise MalformedLine("a response_item without its payload")
    return _response_item(payload, result)


def _response_item(item: dict[str, Any], result: LineResult) -> list[Part]:
    """A Codex (OpenAI Responses) item; the legacy rollouts write these bare, one a line."""
    item_type = item.get("type")
    if item_type == "message":
        role = item.get("role")
        if role not in ("user", "assistant"):
            result.dropped[f"{str(role)[:20]}_message"] += 1  # developer / system: instructions
            return []
        text = tidy(_block_text(item.get("content")))
        if role == "user":
            if _SCAFFOLD.match(text):
                result.dropped["injected"] += 1
                return []
            said = _user_text(text)
            return [(said[0], said[1], Role.USER)] if said else []
        return [("assistant", shorten(text, MAX_TEXT_CHARS), Role.ASSISTANT)] if text else []
    if item_type in ("function_call", "custom_tool_call"):
        arguments: Any = item.get("arguments", item.get("input"))
        if item_type == "function_call" and isinstance(arguments, str):
            arguments = _json_string(arguments)
        label, text = _tool_call(item.get("name"), arguments)
        return [(label, text, Role.ASSISTANT)]
    if item_type == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        label, text = _tool_call("local_shell", action)
        return [(label, text, Role.ASSISTANT)]
    if item_type == "web_search_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        label, text = _tool_call("WebSearch", action)
        return [(label, text, Role.ASSISTANT)]
    if item_type in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        output: Any = item.get("output")
        failed = False
        if isinstance(output, str) and output.lstrip().startswith("{"):
            decoded = _json_string(output)
            if isinstance(decoded, dict) and "output" in decoded:
                metadata = decoded.get("metadata")
                failed = isinstance(metadata, dict) and metadata.get("exit_code") not in (0, None)
                output = decoded["output"]
        elif isinstance(output, dict):
            output = output.get("content", output)
        shown = _tool_result(output, failed)
        return [(shown[0], shown[1], Role.TOOL)] if shown else []
    result.dropped[str(item_type)[:40]] += 1  # reasoning, and kinds this reader does not know
    return []


def _json_string(text: str) -> Any:
    """JSON carried inside a string (Codex's arguments and outputs), depth-checked like a line."""
    data = text.encode("utf-8", "replace")
    if json_too_deep(data, MAX_JSON_DEPTH):
        raise MalformedLine("nested JSON too deep")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _messages_parts(value: dict[str, Any], result: LineResult) -> list[Part]:
    role = value.get("role")
    content = value.get("content")
    if role in ("user", "human"):
        said = _user_text(_block_text(content))
        return [(said[0], said[1], Role.USER)] if said else []
    if role in ("assistant", "ai", "model"):
        text = tidy(_block_text(content))
        return [("assistant", shorten(text, MAX_TEXT_CHARS), Role.ASSISTANT)] if text else []
    if role == "tool":
        name = _label(value.get("name"), 80)
        shown = _tool_result(content, value.get("is_error") is True)
        if shown is None:
            return []
        return [(shown[0] + (f" [{name}]" if name else ""), shown[1], Role.TOOL)]
    result.dropped[f"{str(role)[:20]}_message"] += 1
    return []


def parse_line(raw: bytes | None, context: Context) -> LineResult:
    """The messages of one line (see the module docstring); never raises for what a line holds."""
    result = LineResult()
    value, skipped = decode_line(raw)
    if value is None or raw is None:
        result.skipped = skipped
        return result
    try:
        if context.format is Format.CLAUDE_CODE:
            parts = _claude_parts(value, result)
            session = _label(value.get("sessionId")) or context.session_id
            host_id = _label(value.get("uuid")) or _label(value.get("leafUuid"))
            sidechain = value.get("isSidechain") is True
            agent = (_label(value.get("agentId"), 64) or "") if sidechain else None
        elif context.format is Format.CODEX:
            if "payload" not in value and isinstance(value.get("type"), str):  # legacy: bare items
                parts = [] if value.get("record_type") else _response_item(value, result)
            else:
                parts = _codex_parts(value, result, context)
            session = result.session_id or context.session_id
            host_id, agent = None, None
        else:
            parts = _messages_parts(value, result)
            session = _label(value.get("session_id")) or context.session_id
            host_id = _label(value.get("id"))
            agent = None
        at_ms = _time_ms(value.get("timestamp"))
    except MalformedLine:
        return LineResult(skipped=Skip.MALFORMED)
    base = host_id or _line_id(raw)
    for index, (label, text, role) in enumerate(part for part in parts if part[1]):
        text, found = governance.redact_secrets(text)
        label, found_in_label = governance.redact_secrets(label)
        result.redacted.update(found)
        result.redacted.update(found_in_label)
        source_id = base if index == 0 else f"{base}#{index}"
        result.messages.append(Message(source_id, role, label, text, at_ms, session, agent))
    return result
