"""``crystalmesh integrate codex``: Codex's notify program and MCP server as marked blocks in
config.toml, read back as TOML, run as Codex runs it, and cut out again to the byte."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from node.capture import CaptureQueue
from node.memory import file_lock
from tests.support.cli import Cli
from tests.support.sessions.claude_code import hook_env

CONFIG = """model = "o3"
approval_policy = "on-request"

[profiles.fast]
model = "o4-mini"

[mcp_servers.github]
command = "gh-mcp"
args = []
"""


@pytest.fixture
def codex_home(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    (home / ".codex").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home / ".codex"


def test_install_run_as_codex_runs_it_and_uninstall_to_the_byte(initialised: Cli, codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text(CONFIG)
    assert initialised.json("integrate", "codex")["changed"]
    parsed = tomllib.loads(config.read_text())
    assert parsed["model"] == "o3" and parsed["profiles"]["fast"]["model"] == "o4-mini"
    assert parsed["mcp_servers"]["github"]["command"] == "gh-mcp"
    assert parsed["mcp_servers"]["crystalmesh"]["args"][-1] == "mcp"
    notify = parsed["notify"]
    assert notify[-2:] == ["hook", "codex"] and str(initialised.data_dir) in notify
    before = config.read_bytes()
    assert not initialised.json("integrate", "codex")["changed"] and config.read_bytes() == before

    # Codex after a turn: the notify program with the notification as its last argument.
    thread = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    rollout = codex_home / "sessions" / "2026" / "11" / "02" / f"rollout-2026-11-02T09-30-00-{thread}.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text(json.dumps({"type": "session_meta", "payload": {"id": thread}}) + "\n")
    notification = json.dumps({"type": "agent-turn-complete", "thread-id": thread, "turn-id": "1",
                               "cwd": "/home/dev/project", "input-messages": ["hi"],
                               "last-assistant-message": "hello"})
    queue = CaptureQueue(initialised.data_dir)
    queue.directory.mkdir(parents=True, exist_ok=True)
    with file_lock(queue.drain_lock_path):
        done = subprocess.run([*notify, notification], capture_output=True, env=hook_env(codex_home.parent),
                              timeout=60, check=False)
        assert done.returncode == 0 and done.stdout == b""
        assert [entry.transcript_path for entry in queue.read()] == [str(rollout)]

    assert initialised.json("integrate", "codex", "--uninstall")["changed"]
    assert config.read_text() == CONFIG


def test_an_existing_notify_is_kept_and_a_created_file_removed(initialised: Cli, codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text('notify = ["notify-send", "codex"]\n')
    result = initialised.json("integrate", "codex", "--no-mcp")
    assert not result["changed"] and "kept the existing notify" in result["files"][0]["note"]
    config.unlink()
    initialised.json("integrate", "codex")
    assert "notify" in tomllib.loads(config.read_text())
    initialised.json("integrate", "codex", "--uninstall")
    assert not config.exists()


@pytest.mark.parametrize("content", ['model = "o3\n', "[[x]\n", b"model = '\xff'\n"])
def test_a_config_it_cannot_read_is_refused_untouched(initialised: Cli, codex_home: Path,
                                                      content: str | bytes) -> None:
    config = codex_home / "config.toml"
    data = content.encode() if isinstance(content, str) else content
    config.write_bytes(data)
    assert "config.toml" in initialised.fails("integrate", "codex")
    assert config.read_bytes() == data and list(codex_home.glob("*backup*")) == []
