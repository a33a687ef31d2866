"""``crystalmesh hook claude-code`` run as Claude Code runs it (a process, the hook JSON on stdin):
SessionStart's answer, queueing, and input it must refuse without ever failing the host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from node.capture import CaptureQueue, QueueEntry
from node.memory import file_lock
from tests.support.cli import Cli
from tests.support.sessions.claude_code import hook_argv, hook_env, hook_input, write_session

HAND_WRITTEN = "# Project notes\n\n- The staging database is db-stage-2 (Postgres 16).\n- Deploys go out on Thursdays.\n"


def run_hook(data_dir: Path, home: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(hook_argv(data_dir), input=stdin, capture_output=True, env=hook_env(home),
                          timeout=60, check=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "user").mkdir()
    return tmp_path / "user"


def test_session_start_prints_one_json_object_with_the_working_memory(initialised: Cli, home: Path) -> None:
    state = initialised.data_dir / "memory" / "default"
    state.mkdir(parents=True)
    (state / "MEMORY.md").write_text(HAND_WRITTEN)
    initialised.json("memory", "note", "The user wants commit messages in English", "--importance", "0.9")

    done = run_hook(initialised.data_dir, home, hook_input("SessionStart", "3b1f6a", None, source="startup"))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)  # the whole of stdout is this one object
    assert list(answer) == ["hookSpecificOutput"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert "db-stage-2" in context and "(importance: 0.9) The user wants commit messages in English" in context
    # exactly what `crystalmesh memory context` serves for the same window
    assert context == initialised.json("memory", "context")["context"]


def test_session_start_stays_under_claude_codes_inline_cap(initialised: Cli, home: Path) -> None:
    state = initialised.data_dir / "memory" / "default"
    state.mkdir(parents=True)
    (state / "MEMORY.md").write_text("".join(f"- fact number {i} about the build system\n" for i in range(2000)))
    for i in range(40):
        initialised.json("memory", "note", f"pending note {i} " + "x" * 300)
    done = run_hook(initialised.data_dir, home, hook_input("SessionStart", "s-cap", None))
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert done.returncode == 0 and 1000 < len(context) <= 10_000
    assert "[Full working memory available via memory_search]" in context


def test_session_start_without_an_initialised_node_still_answers(tmp_path: Path, home: Path) -> None:
    done = run_hook(tmp_path / "nothing-here", home, hook_input("SessionStart", "s0", None))
    assert done.returncode == 0
    assert "Working Memory" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


def test_stop_queues_the_transcript_before_it_returns(initialised: Cli, home: Path, tmp_path: Path) -> None:
    transcript = write_session(tmp_path / "projects" / "p" / "sess-1.jsonl", "sess-1",
                               [("user", "hello"), ("assistant", "hi")])
    queue = CaptureQueue(initialised.data_dir)
    queue.directory.mkdir(parents=True)
    # A worker already running: the hook's own worker exits at once and the entry must be on disk.
    with file_lock(queue.drain_lock_path):
        done = run_hook(initialised.data_dir, home, hook_input("Stop", "sess-1", transcript, stop_hook_active=False))
        assert done.returncode == 0 and done.stdout == b""
        entries = queue.read()
    assert [(e.event, e.session_id, e.transcript_path, e.host) for e in entries] == [
        ("Stop", "sess-1", str(transcript), "claude-code")]


HOSTILE = [
    b"",
    b"not json at all",
    b"[" * 200_000,
    b'{"hook_event_name": "Stop", "session_id": "s", "x": "' + b"a" * (2 * 1024 * 1024) + b'"}',
    b'["SessionEnd"]',
    b'{"hook_event_name": "SessionEnd"}',
    b'{"hook_event_name": "SessionEnd", "session_id": "../../etc", "transcript_path": "/tmp/x.jsonl"}',
    b'{"hook_event_name": "Stop", "session_id": "s1", "transcript_path": "relative/s1.jsonl"}',
    b'{"hook_event_name": "Stop", "session_id": "s1", "transcript_path": "/proc/self/environ"}',
    b'{"hook_event_name": "Stop", "session_id": "s1", "transcript_path": {"nested": true}}',
    b'{"hook_event_name": "Stop", "session_id": "s1", "transcript_path": "\xff\xfe"}',
]


@pytest.mark.parametrize("stdin", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_exits_zero_prints_nothing_and_queues_nothing(initialised: Cli, home: Path,
                                                                   stdin: bytes) -> None:
    done = run_hook(initialised.data_dir, home, stdin)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    assert CaptureQueue(initialised.data_dir).read() == []
    log = (initialised.data_dir / "capture" / "capture.log").read_text()
    assert "level=ERROR" in log and "Traceback" not in log


def test_a_transcript_path_into_the_data_dir_is_never_read(initialised: Cli, home: Path, tmp_path: Path) -> None:
    bait = tmp_path / "bait"
    bait.mkdir()
    (bait / "keys.jsonl").symlink_to(initialised.data_dir / "identity.key")
    (bait / "folder.jsonl").mkdir()
    (initialised.data_dir / "inside.jsonl").write_text("{}\n")
    for path in (bait / "keys.jsonl", bait / "folder.jsonl", initialised.data_dir / "inside.jsonl"):
        done = run_hook(initialised.data_dir, home, hook_input("SessionEnd", "s2", path, reason="exit"))
        assert done.returncode == 0 and done.stdout == b""
    assert CaptureQueue(initialised.data_dir).read() == []
    log = (initialised.data_dir / "capture" / "capture.log").read_text()
    assert log.count("level=ERROR") == 3 and "never reads" in log and "not a regular file" in log


def test_codex_notify_queues_the_threads_rollout(initialised: Cli, home: Path) -> None:
    thread = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    rollout = home / ".codex" / "sessions" / "2026" / "11" / "02" / f"rollout-2026-11-02T09-30-00-{thread}.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text(json.dumps({"timestamp": "2026-11-02T09:30:00.000Z", "type": "session_meta",
                                   "payload": {"id": thread}}) + "\n")
    notification = json.dumps({"type": "agent-turn-complete", "thread-id": thread, "turn-id": "12",
                               "cwd": "/home/dev/project", "input-messages": ["fix the build"],
                               "last-assistant-message": "Done."})
    queue = CaptureQueue(initialised.data_dir)
    queue.directory.mkdir(parents=True)
    argv = [*hook_argv(initialised.data_dir)[:-1], "codex", notification]
    with file_lock(queue.drain_lock_path):
        done = subprocess.run(argv, capture_output=True, env=hook_env(home), timeout=60, check=False)
        entries = queue.read()
    assert done.returncode == 0 and done.stdout == b""
    assert [(e.host, e.event, e.session_id, e.transcript_path) for e in entries] == [
        ("codex", "agent-turn-complete", thread, str(rollout))]


def test_the_hook_loads_no_http_client_store_or_embedder(initialised: Cli, home: Path) -> None:
    """The fast path: the modules a SessionStart answer loads."""
    probe = ("import json, sys\nfrom node.cli.main import main\ncode = main(sys.argv[1:])\n"
             "sys.stderr.write(json.dumps(sorted(sys.modules)))\nsys.exit(code)")
    argv = [sys.executable, "-c", probe, *hook_argv(initialised.data_dir)[3:]]
    done = subprocess.run(argv, input=hook_input("SessionStart", "s3", None), capture_output=True,
                          env=hook_env(home), timeout=60, check=False)
    imported = set(json.loads(done.stderr))
    assert json.loads(done.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert {"node.capture.hook_input", "node.memory.working.bootstrap"} <= imported
    assert not imported & {"click", "httpx", "node.config", "node.memory.facade", "node.crystals", "hnswlib",
                           "numpy", "trio"}


def test_hook_status_shows_the_queue_and_the_log(initialised: Cli, tmp_path: Path) -> None:
    queue = CaptureQueue(initialised.data_dir)
    queue.directory.mkdir(parents=True)
    transcript = write_session(tmp_path / "s9.jsonl", "s9", [("user", "hello")])
    queue.append(QueueEntry.new("claude-code", "Stop", "s9", str(transcript), "default"))
    status = initialised.json("hook", "status")
    assert status["queue"] == str(queue.path) and status["log"].endswith("capture.log")
    assert [entry["session_id"] for entry in status["pending"]] == ["s9"]
    drained = initialised.json("hook", "drain")
    assert (drained["stored"], drained["added"]) == (1, 1) and initialised.json("hook", "status")["pending"] == []
