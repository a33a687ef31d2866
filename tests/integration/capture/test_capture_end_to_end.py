"""A Claude Code session captured end to end through the hooks ``integrate claude-code`` installs,
each run as Claude Code runs it (the settings' command through a shell, the hook JSON on stdin,
a transcript file that grows): with no node, with a running node, and with a node that is down
when the hook fires. The content becomes searchable with its session id, a grown transcript adds
only its new messages, and MEMORY.md comes back at the next session's start."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from node.api import ApiClient
from node.capture import CaptureQueue
from node.config import load_config
from node.init import init_node
from node.service import NodeService
from tests.support.cli import Cli
from tests.support.sessions.claude_code import hook_env, hook_input, write_session
from tests.support.wait import wait_until, wait_until_async

SESSION = "0f6c1d2e-8a4b-4c3d-9e5f-7a6b5c4d3e2f"
FIRST = [("user", "The upload test is flaky again, can you look at test_upload_retry?"),
         ("assistant", "The flakiness comes from the mock clock drifting between the retry attempts."),
         ("user", "Pin the clock with the HandClock helper then."),
         ("assistant", "Done: test_upload_retry now uses HandClock and passed 200 runs in a row.")]
MORE = [("user", "Also bump the retry budget of the uploader to five attempts."),
        ("assistant", "The uploader retry budget is now five attempts with exponential backoff."),
        ("user", "Thanks, that is all for today.")]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    (home / ".claude" / "projects" / "-home-dev-project").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def hook_commands(home: Path) -> dict[str, str]:
    """The command Claude Code would run for each event, from the installed settings."""
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    return {event: groups[-1]["hooks"][0]["command"] for event, groups in settings["hooks"].items()}


async def fire(command: str, stdin: bytes, home: Path) -> trio.CompletedProcess:
    """The hook as Claude Code runs it: ``sh -c COMMAND``, the JSON on stdin; it must not fail."""
    done = await trio.run_process(command, shell=True, stdin=stdin, capture_stdout=True, capture_stderr=True,
                                  env=hook_env(home), check=False)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    return done


def drained(data_dir: Path) -> bool:
    return CaptureQueue(data_dir).read() == [] and "capture: stored" in capture_log(data_dir)


def capture_log(data_dir: Path) -> str:
    path = data_dir / "capture" / "capture.log"
    return path.read_text() if path.exists() else ""


def session_hits(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [hit for hit in hits if hit.get("turn") and hit["turn"]["session"] == SESSION]


def test_a_session_without_a_node_is_stored_and_memory_md_opens_the_next(initialised: Cli, home: Path) -> None:
    initialised.json("integrate", "claude-code")
    commands = hook_commands(home)
    transcript = write_session(home / ".claude" / "projects" / "-home-dev-project" / f"{SESSION}.jsonl",
                               SESSION, FIRST)

    stop = trio.run(fire, commands["Stop"], hook_input("Stop", SESSION, transcript, stop_hook_active=False), home)
    assert stop.stdout == b""
    wait_until(lambda: drained(initialised.data_dir), what="the worker to store the transcript")
    hits = session_hits(initialised.json("memory", "search", "flaky upload test mock clock drifting"))
    assert hits and "mock clock drifting" in hits[0]["crystal"]["text"]
    assert hits[0]["turn"]["at_ms"] > 0

    write_session(transcript, SESSION, MORE, start_index=len(FIRST))
    trio.run(fire, commands["SessionEnd"], hook_input("SessionEnd", SESSION, transcript, reason="exit"), home)
    wait_until(lambda: "added=3 " in capture_log(initialised.data_dir), what="the grown transcript's 3 new turns")
    wait_until(lambda: CaptureQueue(initialised.data_dir).read() == [], what="an empty queue")
    assert session_hits(initialised.json("memory", "search", "uploader retry budget five attempts"))
    assert initialised.json("memory", "status")["tiers"]["last_session_end_ms"] is not None

    initialised.json("memory", "note", "The user pins flaky clocks with HandClock", "--importance", "0.9")
    assert initialised.run("memory", "dream")[0] == 0
    start = trio.run(fire, commands["SessionStart"], hook_input("SessionStart", "next-session", None,
                                                                   source="startup"), home)
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    memory_md = (initialised.data_dir / "memory" / "default" / "MEMORY.md").read_text()
    assert memory_md.strip() and memory_md.strip()[:2000] in context
    assert context == initialised.json("memory", "context")["context"]



def client_of(service: NodeService) -> ApiClient:
    return ApiClient(f"http://127.0.0.1:{service.api_port}", service.api_token)


async def search(service: NodeService, query: str) -> list[dict[str, Any]]:
    return await trio.to_thread.run_sync(lambda: client_of(service).memory_search(query))


def hook_command(data_dir: Path) -> str:
    import shlex
    import sys

    return shlex.join([sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "hook", "claude-code"])


async def test_with_a_running_node_the_worker_hands_the_session_to_it(node: NodeService, home: Path) -> None:
    data_dir = node.config.data_dir
    transcript = write_session(home / "s.jsonl", SESSION, FIRST)
    await fire(hook_command(data_dir), hook_input("PreCompact", SESSION, transcript, trigger="auto"), home)
    await wait_until_async(lambda: drained(data_dir), what="the worker to hand the transcript to the node")
    assert "through the node's API" in capture_log(data_dir)
    hits = session_hits(await search(node, "flaky upload test mock clock drifting"))
    assert hits and "mock clock drifting" in hits[0]["crystal"]["text"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_node_that_is_down_when_the_hook_fires_loses_nothing(tmp_path: Path, home: Path,
                                                                    nursery: trio.Nursery) -> None:
    data_dir = tmp_path / "node"
    config = init_node(data_dir, name="agent", embedder="hashing")
    config = load_config(data_dir, environ={})
    # A node that looks alive (its pid answers) but whose API does not: it hung or is restarting.
    config.pid_path.write_text(f"{os.getpid()}\n")
    config.api_port_path.write_text(f"{closed_port()}\n")
    transcript = write_session(home / "s.jsonl", SESSION, FIRST)

    done = await fire(hook_command(data_dir), hook_input("SessionEnd", SESSION, transcript, reason="logout"), home)
    assert done.stdout == b""
    failed = await wait_until_async(lambda: [e for e in CaptureQueue(data_dir).read() if e.attempts >= 1],
                                    what="the worker's failed attempt")
    assert failed[0].session_id == SESSION and "cannot reach the node" in (failed[0].error or "")
    assert "kept for the next run" in capture_log(data_dir)

    config.pid_path.unlink()
    config.api_port_path.unlink()
    service = NodeService(config)
    await nursery.start(service.run)
    # The next session's start drains what the last one left.
    start = await fire(hook_command(data_dir), hook_input("SessionStart", "next", None, source="startup"), home)
    assert json.loads(start.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    await wait_until_async(lambda: drained(data_dir), what="the queued transcript to reach the node")
    assert session_hits(await search(service, "flaky upload test mock clock drifting"))
