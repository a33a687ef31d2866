"""``crystalmesh integrate claude-code``: merged into the user's settings, never clobbering them,
idempotent, backed up, and taken out again to the byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from node.capture import HOOK_EVENTS
from tests.support.cli import Cli

SETTINGS = """{
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run lint)"], "deny": []},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]
    },
    "env": {"LANG": "de_DE.UTF-8", "GREETING": "grüß dich"}
}
"""
CLAUDE_JSON = '{"numStartups": 12, "mcpServers": {"github": {"command": "gh-mcp", "args": []}}}'


@pytest.fixture
def home(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def _our_commands(settings: dict) -> dict[str, list[str]]:
    return {event: [hook["command"] for group in groups for hook in group["hooks"]
                    if "hook claude-code" in hook["command"]]
            for event, groups in settings.get("hooks", {}).items()}


def test_install_merges_and_uninstall_restores_every_byte(initialised: Cli, home: Path) -> None:
    settings, claude_json = home / ".claude" / "settings.json", home / ".claude.json"
    settings.write_text(SETTINGS)
    claude_json.write_text(CLAUDE_JSON)

    result = initialised.json("integrate", "claude-code")
    assert result["changed"] and len(result["backups"]) == 2
    merged = json.loads(settings.read_text())
    ours = _our_commands(merged)
    assert all(len(ours[event]) == 1 for event in HOOK_EVENTS)
    command = ours["SessionStart"][0]
    assert f"--data-dir {initialised.data_dir}" in command and command.startswith("/")
    # everything the user had is still there, in place
    assert merged["model"] == "opus" and merged["env"]["GREETING"] == "grüß dich"
    assert merged["hooks"]["Stop"][0] == {"hooks": [{"type": "command", "command": "notify-send done"}]}
    assert merged["hooks"]["PreToolUse"] == json.loads(SETTINGS)["hooks"]["PreToolUse"]
    assert "    \"model\"" in settings.read_text()  # the file's own 4-space indentation
    servers = json.loads(claude_json.read_text())["mcpServers"]
    assert servers["github"] == {"command": "gh-mcp", "args": []}
    assert servers["crystalmesh"]["args"][-1] == "mcp"
    assert Path(result["backups"][0]).read_text() == SETTINGS

    before_second = settings.read_bytes(), claude_json.read_bytes()
    again = initialised.json("integrate", "claude-code")
    assert not again["changed"] and again["backups"] == []
    assert (settings.read_bytes(), claude_json.read_bytes()) == before_second

    removed = initialised.json("integrate", "claude-code", "--uninstall")
    assert removed["changed"]
    assert settings.read_text() == SETTINGS
    assert claude_json.read_text() == CLAUDE_JSON


def test_uninstall_keeps_what_changed_since(initialised: Cli, home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.write_text(SETTINGS)
    initialised.json("integrate", "claude-code", "--no-mcp")
    edited = json.loads(settings.read_text())
    edited["model"] = "sonnet"
    settings.write_text(json.dumps(edited, indent=4) + "\n")
    initialised.json("integrate", "claude-code", "--no-mcp", "--uninstall")
    after = json.loads(settings.read_text())
    assert after == json.loads(SETTINGS) | {"model": "sonnet"}
    assert _our_commands(after) == {"Stop": [], "PreToolUse": []}


def test_files_the_install_created_are_removed_again(initialised: Cli, home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    initialised.json("integrate", "claude-code", "--scope", "project")
    assert _our_commands(json.loads((project / ".claude" / "settings.json").read_text()))["Stop"]
    assert "crystalmesh" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    initialised.json("integrate", "claude-code", "--scope", "project", "--uninstall")
    assert not (project / ".claude" / "settings.json").exists()
    assert not (project / ".mcp.json").exists()


def test_dry_run_prints_a_diff_and_writes_nothing(initialised: Cli, home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.write_text(SETTINGS)
    code, out, _ = initialised.run("integrate", "claude-code", "--dry-run")
    assert code == 0 and "+++" in out and "hook claude-code" in out
    assert settings.read_text() == SETTINGS and not (home / ".claude.json").exists()
    assert list(settings.parent.glob("*backup*")) == []


@pytest.mark.parametrize("content", ['{"hooks": {', "[1, 2]", '{"a":' * 300 + "1" + "}" * 300,
                                     '{"hooks": {"Stop": {"not": "a list"}}}'])
def test_a_settings_file_it_cannot_read_is_refused_untouched(initialised: Cli, home: Path, content: str) -> None:
    settings = home / ".claude" / "settings.json"
    settings.write_text(content)
    line = initialised.fails("integrate", "claude-code")
    assert str(settings) in line or "settings.hooks" in line
    assert settings.read_text() == content
    assert list(settings.parent.glob("*backup*")) == [] and not (home / ".claude.json").exists()


def test_an_mcp_entry_of_the_same_name_that_is_not_ours_is_kept(initialised: Cli, home: Path) -> None:
    claude_json = home / ".claude.json"
    mine = {"mcpServers": {"crystalmesh": {"command": "/opt/cm/bin/crystalmesh", "args": ["--node", "n1", "mcp"]}}}
    claude_json.write_text(json.dumps(mine))
    result = initialised.json("integrate", "claude-code")
    assert "kept the existing" in result["files"][1]["note"]
    assert json.loads(claude_json.read_text()) == mine
    initialised.json("integrate", "claude-code", "--uninstall")
    assert json.loads(claude_json.read_text()) == mine
