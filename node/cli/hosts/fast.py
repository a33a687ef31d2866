"""``crystalmesh hook claude-code`` and ``crystalmesh hook codex``: what a host's hook runs.

Answered before the click command tree is imported (``crystalmesh --help`` imports
everything, ~0.5 s): this module imports only the capture package, the working-memory
files reader and the standard library. No HTTP client, no store, no embedder.

* ``SessionStart``: stdout is exactly one JSON object, Claude Code's
  ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}``
  with seed 001's bootstrap context (MEMORY.md + pending scratch notes within the
  budget), read from the data dir's files under the scratch lock, the same bytes a
  running node would serve. A non-empty queue starts the drain worker.
* ``PreCompact``, ``Stop``, ``SubagentStop``, ``SessionEnd`` (and Codex's
  ``agent-turn-complete``): the transcript is appended to the capture queue (durable)
  and a detached worker (``crystalmesh hook drain``) stores it, through the running
  node's API when there is one, else in the data dir itself.

Whatever happens, the exit code is 0 and nothing but that JSON reaches stdout: a
failure is one line in ``<data dir>/capture/capture.log``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from node.capture import (
    CONTEXT_EVENTS,
    INGEST_EVENTS,
    MAX_HOOK_INPUT_BYTES,
    CaptureQueue,
    HookEvent,
    HookInputRefused,
    QueueEntry,
    capture_log,
    checked_transcript,
    find_codex_rollout,
    parse_claude_code_input,
    parse_codex_notify,
    spawn_detached,
)

log = logging.getLogger("node.capture.hook")

HOSTS = ("claude-code", "codex")
# Claude Code shows at most 10,000 characters of a hook's injected text inline (more is
# saved to a file and replaced by a preview); the context is sized to stay under it.
HOOK_CONTEXT_MAX_CHARS = 10_000
DEFAULT_NAMESPACE = "default"


def default_data_dir() -> Path:
    """``--data-dir``'s default, as ``CliContext.resolve_data_dir`` has it."""
    from node.config import crystalmesh_home

    env = os.environ.get("CRYSTALMESH_DATA_DIR")
    return Path(env).expanduser() if env else crystalmesh_home() / "default"


def _parse(args: Sequence[str]) -> tuple[Path | None, str, str, list[str]] | None:
    """(data dir, host, namespace, rest) of ``[--data-dir D] hook HOST [--namespace N] [--data-dir D]
    [ARG]``; None for anything else (click answers it: help, --node, a typo)."""
    data_dir: Path | None = None
    namespace = DEFAULT_NAMESPACE
    words: list[str] = []
    items = list(args)
    while items:
        item = items.pop(0)
        if item in ("--data-dir", "--namespace") and items:
            value = items.pop(0)
            if item == "--data-dir":
                data_dir = Path(value).expanduser()
            else:
                namespace = value
        elif item.startswith("--data-dir="):
            data_dir = Path(item.split("=", 1)[1]).expanduser()
        elif item.startswith("--namespace="):
            namespace = item.split("=", 1)[1]
        elif item == "--debug":
            continue
        elif item.startswith("-"):
            return None
        else:
            words.append(item)
    if len(words) < 2 or words[0] != "hook" or words[1] not in HOSTS:
        return None
    rest = words[2:]
    if (words[1] == "claude-code" and rest) or (words[1] == "codex" and len(rest) != 1):
        return None
    return data_dir, words[1], namespace, rest


def hook_fast_path(args: Sequence[str]) -> int | None:
    """Run ``crystalmesh hook claude-code|codex`` if ``args`` ask for it (exit code, always 0);
    None if they ask for something else."""
    parsed = _parse(args)
    if parsed is None:
        return None
    data_dir, host, namespace, rest = parsed
    try:
        data_dir = data_dir or default_data_dir()
        log_to_capture_file(data_dir)
    except Exception:  # no log file: still never fail the host
        return 0
    try:
        output = None
        if host == "claude-code":
            output = claude_code_hook(data_dir, namespace, _read_stdin())
        else:
            codex_hook(data_dir, namespace, rest[0])
    except Exception as error:
        log.error("hook %s failed: %s: %s", host, type(error).__name__, error)
        return 0
    if output is not None:
        sys.stdout.write(output)
        sys.stdout.flush()
    return 0


def _read_stdin() -> bytes:
    return sys.stdin.buffer.read(MAX_HOOK_INPUT_BYTES + 1)


def log_to_capture_file(data_dir: Path) -> None:
    from node.memory import ensure_dir

    log_path = capture_log(data_dir)
    ensure_dir(log_path.parent)
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def claude_code_hook(data_dir: Path, namespace: str, stdin: bytes) -> str | None:
    """What ``crystalmesh hook claude-code`` prints for ``stdin`` (None: nothing)."""
    event = parse_claude_code_input(stdin)
    if event.event in CONTEXT_EVENTS:
        return session_start(data_dir, namespace)
    if event.event in INGEST_EVENTS:
        enqueue(data_dir, namespace, event)
    else:
        log.info("hook claude-code: %s is not an event crystalmesh acts on", event.event)
    return None


def codex_hook(data_dir: Path, namespace: str, argument: str) -> None:
    """Codex's ``notify``: queue the thread's rollout after a turn."""
    event = parse_codex_notify(argument)
    if event.event not in INGEST_EVENTS:
        log.info("hook codex: %s is not a notification crystalmesh acts on", event.event)
        return
    rollout = find_codex_rollout(event.session_id)
    if rollout is None:
        log.warning("hook codex: no rollout file for thread %s", event.session_id)
        return
    enqueue(data_dir, namespace, HookEvent("codex", event.event, event.session_id, str(rollout), event.cwd))


def session_start(data_dir: Path, namespace: str) -> str:
    """Claude Code's SessionStart answer: the bootstrap context as ``additionalContext``."""
    from node.memory import bootstrap_context, validate_namespace

    context = bootstrap_context(data_dir, validate_namespace(namespace), max_chars=HOOK_CONTEXT_MAX_CHARS)
    queue = CaptureQueue(data_dir)
    if queue.pending():
        start_worker(data_dir)
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                              "additionalContext": context}}, ensure_ascii=False)


def enqueue(data_dir: Path, namespace: str, event: HookEvent) -> None:
    """Queue ``event``'s transcript durably and start the worker."""
    from node.memory import validate_namespace

    if event.transcript_path is None:
        raise HookInputRefused(f"{event.event} carries no transcript_path")
    transcript = checked_transcript(event.transcript_path, data_dir)
    entry = QueueEntry.new(event.host, event.event, event.session_id, str(transcript),
                           validate_namespace(namespace))
    CaptureQueue(data_dir).append(entry)
    log.info("hook %s: queued %s of session %s (%s)", event.host, transcript, event.session_id, event.event)
    start_worker(data_dir)


def start_worker(data_dir: Path) -> None:
    """``crystalmesh hook drain`` in the background, unless one runs (it serves what was queued
    while it ran: ``node.capture.drain``); a Stop after every turn then costs no new process."""
    if CaptureQueue(data_dir).worker_running():
        log.info("hook: a capture worker is running; it takes the new entry")
        return
    argv = [sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "hook", "drain"]
    spawn_detached(argv, capture_log(data_dir))
