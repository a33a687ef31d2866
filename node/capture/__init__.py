"""Capture from agent hosts: the hooks Claude Code (and Codex) call, the queue that makes them
never wait and never lose a transcript, the worker that drains it, the settings merge that
installs the hooks, and a folder watcher for hosts without hooks.

The rule this package keeps: a hook returns at once. It validates what the host sent
(untrusted), appends one durable line to ``<data dir>/capture/queue.jsonl`` and starts a
detached worker; the worker ingests through a client it is given (the running node's API,
or the data dir opened locally) and removes an entry only after it is stored. Nothing here
imports the API or the CLI: callers hand in the client.

Outside this package, import only the names below (``node/face.py``; enforced by
``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.capture.claude_code import HOOK_EVENTS as HOOK_EVENTS
    from node.capture.claude_code import MCP_SERVER_NAME as MCP_SERVER_NAME
    from node.capture.claude_code import IntegrationPlan as IntegrationPlan
    from node.capture.claude_code import SettingsRefused as SettingsRefused
    from node.capture.claude_code import apply_plan as apply_plan
    from node.capture.claude_code import plan_integration as plan_integration
    from node.capture.codex import find_codex_rollout as find_codex_rollout
    from node.capture.codex import parse_codex_notify as parse_codex_notify
    from node.capture.codex_config import plan_codex as plan_codex
    from node.capture.drain import DrainReport as DrainReport
    from node.capture.drain import TranscriptSink as TranscriptSink
    from node.capture.drain import drain_queue as drain_queue
    from node.capture.hook_input import CONTEXT_EVENTS as CONTEXT_EVENTS
    from node.capture.hook_input import INGEST_EVENTS as INGEST_EVENTS
    from node.capture.hook_input import MAX_HOOK_INPUT_BYTES as MAX_HOOK_INPUT_BYTES
    from node.capture.hook_input import HookEvent as HookEvent
    from node.capture.hook_input import HookInputRefused as HookInputRefused
    from node.capture.hook_input import checked_transcript as checked_transcript
    from node.capture.hook_input import parse_claude_code_input as parse_claude_code_input
    from node.capture.queue import CaptureQueue as CaptureQueue
    from node.capture.queue import QueueEntry as QueueEntry
    from node.capture.queue import capture_log as capture_log
    from node.capture.spawn import spawn_detached as spawn_detached
    from node.capture.watch import TranscriptWatcher as TranscriptWatcher

__getattr__ = face(__name__)
