"""Codex CLI's ``~/.codex/config.toml``: our ``notify`` program and MCP server in, and out again.

Codex reads TOML and nothing here writes TOML in general: our two settings go in as
marked blocks of text (``notify`` first, where a top-level key must stand; the
``[mcp_servers.crystalmesh]`` table at the end), each checked by reading the result
back with ``tomllib``, and ``--uninstall`` cuts exactly those blocks out again, so the
file ends as it was. Codex runs one ``notify`` program: one already set is kept (and
named in the plan's note), as is a server of our name that we did not write.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from node.capture.claude_code import (
    MAX_SETTINGS_BYTES,
    MCP_SERVER_NAME,
    FileChange,
    IntegrationPlan,
    SettingsRefused,
    backups_of,
)
from node.memory import read_bytes

NOTIFY_BEGIN = "# >>> crystalmesh: notify (crystalmesh integrate codex) >>>\n"
MCP_BEGIN = "# >>> crystalmesh: MCP server (crystalmesh integrate codex) >>>\n"
BLOCK_END = "# <<< crystalmesh <<<\n"


def _toml_array(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def _cut(text: str, begin: str, lead: str = "") -> str:
    start = text.find(lead + begin)
    if start < 0:
        return text
    end = text.find(BLOCK_END, start)
    return text if end < 0 else text[:start] + text[end + len(BLOCK_END):]


def _without_ours(text: str) -> str:
    return _cut(_cut(text, NOTIFY_BEGIN), MCP_BEGIN, "\n")


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsRefused(f"{path} is not valid TOML ({error}); left as it is") from None


def plan_codex(config_path: Path, notify: list[str], server: dict[str, Any], uninstall: bool = False,
               with_mcp: bool = True) -> IntegrationPlan:
    """``config_path``'s new bytes: our ``notify`` program and ``[mcp_servers.crystalmesh]``
    added (an existing ``notify`` or server of that name that is not ours is kept), or taken out."""
    before = read_bytes(config_path, MAX_SETTINGS_BYTES)
    try:
        text = (before or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsRefused(f"{config_path} is not UTF-8 text; left as it is") from None
    _parse_toml(config_path, text)
    base = _without_ours(text)
    if uninstall:
        after: bytes | None = base.encode()
        backups = backups_of(config_path)
        if base == "" and backups and (read_bytes(backups[-1], MAX_SETTINGS_BYTES) or b"") == b"":
            after = None
        return IntegrationPlan(True, (FileChange(config_path, before, before if base == text else after),))
    parsed = _parse_toml(config_path, base)
    notes, top, bottom = [], "", ""
    if "notify" in parsed:
        notes.append("kept the existing notify program (Codex runs one): add `crystalmesh hook codex` to it")
    else:
        top = f"{NOTIFY_BEGIN}notify = {_toml_array(notify)}\n{BLOCK_END}"
    if with_mcp:
        if MCP_SERVER_NAME in (parsed.get("mcp_servers") or {}):
            notes.append(f"kept the existing mcp_servers.{MCP_SERVER_NAME} table (not ours)")
        else:
            bottom = (f"\n{MCP_BEGIN}[mcp_servers.{MCP_SERVER_NAME}]\ncommand = {json.dumps(server['command'])}\n"
                      f"args = {_toml_array(server['args'])}\n{BLOCK_END}")
    new = top + base + bottom
    _parse_toml(config_path, new)  # what we write must read back
    return IntegrationPlan(False, (FileChange(config_path, before, before if new == text else new.encode(),
                                              "; ".join(notes)),))
