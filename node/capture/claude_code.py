"""Claude Code's settings: add crystalmesh's hooks and MCP server, and take exactly them out again.

Where Claude Code reads them (its settings and MCP documentation): hooks live in
``~/.claude/settings.json`` (user scope) or ``<project>/.claude/settings.json``
(project scope) as ``{"hooks": {"<Event>": [{"matcher": …, "hooks": [{"type":
"command", "command": …, "timeout": …}]}]}}``; MCP servers are not a settings.json
key: the user scope keeps them in ``~/.claude.json`` under ``mcpServers``, the
project scope in ``<project>/.mcp.json`` under ``mcpServers``.

The merge never clobbers: every key, hook and server already there stays as it is;
ours are added once (a second run changes nothing); a file that is not a JSON object
is refused, never overwritten. Before a file is written its previous bytes are kept
next to it (``<name>.crystalmesh-backup-<UTC time>``; an empty backup means the file
did not exist), and the write itself is a temp file + rename. ``--uninstall`` removes
our hooks (every command that runs ``… hook claude-code``) and our server entry; when
nothing else changed since the install, the file is restored byte for byte from the
install's backup (or removed if the install created it).

Pure functions of JSON values here, and one ``apply_plan`` that writes.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.capture.hook_input import HookInputRefused, load_json_object
from node.errors import CrystalmeshError
from node.memory import atomic_write, read_bytes

HOOK_EVENTS = ("SessionStart", "PreCompact", "Stop", "SessionEnd")
MCP_SERVER_NAME = "crystalmesh"
# Claude Code's per-hook limit: ours return in well under a second; this only bounds a wedge.
HOOK_TIMEOUT_S = 30
MAX_SETTINGS_BYTES = 64 * 1024 * 1024  # ~/.claude.json keeps project histories: it grows large
MAX_SETTINGS_DEPTH = 256
BACKUP_MARK = ".crystalmesh-backup-"
UNINSTALL_MARK = ".crystalmesh-before-uninstall-"
_OUR_HOOK = re.compile(r"(crystalmesh|node\.cli\.main)\S*(\s.*)?\shook\s+claude-code(\s|$)")
Json = dict[str, Any]


class SettingsRefused(CrystalmeshError):
    """A settings file crystalmesh will not edit (not JSON, not an object, too large)."""

    code = "settings_refused"


def is_our_hook(command: object) -> bool:
    return isinstance(command, str) and _OUR_HOOK.search(command) is not None


# --- pure merges ------------------------------------------------------------------------------
def add_hooks(settings: Json, command: str) -> Json:
    """``settings`` with our hook on every event of ``HOOK_EVENTS`` (an older command of ours
    is replaced where it stands; everything else untouched)."""
    merged = copy.deepcopy(settings)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsRefused("settings.hooks is not an object; fix it by hand first")
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsRefused(f"settings.hooks.{event} is not a list; fix it by hand first")
        ours = [hook for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
                for hook in group["hooks"] if isinstance(hook, dict) and is_our_hook(hook.get("command"))]
        if not ours:
            groups.append({"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]})
        for hook in ours:
            hook["command"] = command
    return merged


def remove_hooks(settings: Json) -> Json:
    """``settings`` without our hooks; a group, event or ``hooks`` key left empty by that goes too."""
    cleaned = copy.deepcopy(settings)
    hooks = cleaned.get("hooks")
    if not isinstance(hooks, dict):
        return cleaned
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [hook for hook in inner if not (isinstance(hook, dict) and is_our_hook(hook.get("command")))]
            if len(kept) == len(inner):
                kept_groups.append(group)
            elif kept:
                kept_groups.append(group | {"hooks": kept})
        if len(kept_groups) != len(groups) and not kept_groups:
            del hooks[event]
        else:
            hooks[event] = kept_groups
    if not hooks and "hooks" in settings and settings["hooks"]:
        del cleaned["hooks"]
    return cleaned


def add_server(config: Json, server: Json) -> tuple[Json, bool]:
    """``config`` with ``mcpServers.crystalmesh`` = ``server``; False if another entry already has
    that name (it is kept: the user registered it)."""
    merged = copy.deepcopy(config)
    servers = merged.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise SettingsRefused("mcpServers is not an object; fix it by hand first")
    existing = servers.get(MCP_SERVER_NAME)
    if existing is not None and existing != server:
        return config, False
    servers[MCP_SERVER_NAME] = server
    return merged, True


def remove_server(config: Json, server: Json) -> Json:
    """``config`` without our entry (only if it is still exactly what we wrote)."""
    servers = config.get("mcpServers")
    if not isinstance(servers, dict) or servers.get(MCP_SERVER_NAME) != server:
        return config
    cleaned = copy.deepcopy(config)
    del cleaned["mcpServers"][MCP_SERVER_NAME]
    if not cleaned["mcpServers"]:
        del cleaned["mcpServers"]
    return cleaned


# --- files ------------------------------------------------------------------------------------
def load_settings(path: Path) -> tuple[bytes | None, Json]:
    """The file's bytes (None if absent) and its JSON object ({} if absent)."""
    try:
        data = read_bytes(path, MAX_SETTINGS_BYTES)
    except OSError as error:
        raise SettingsRefused(f"{path}: {error}") from None
    if data is None:
        return None, {}
    try:
        value = load_json_object(data, str(path), MAX_SETTINGS_BYTES, MAX_SETTINGS_DEPTH)
    except HookInputRefused as error:
        raise SettingsRefused(f"{error}; left as it is") from None
    return data, value


def render(value: Json, like: bytes | None) -> bytes:
    """``value`` as JSON in the file's own indentation (two spaces for a new file), with its
    trailing newline."""
    indent: int | str = 2
    if like:
        match = re.search(rb"\n([ \t]+)\S", like)
        if match:
            whitespace = match.group(1).decode()
            indent = whitespace if "\t" in whitespace else len(whitespace)
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    newline = like is None or like.endswith(b"\n")
    return (text + ("\n" if newline else "")).encode("utf-8")


def backups_of(path: Path, mark: str = BACKUP_MARK) -> list[Path]:
    """Install backups of ``path``, oldest first (the UTC time in the name sorts)."""
    return sorted(path.parent.glob(path.name + mark + "*"))


@dataclass(frozen=True)
class FileChange:
    path: Path
    before: bytes | None  # None: the file does not exist
    after: bytes | None  # None: the file is removed
    note: str = ""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = (self.before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        new = (self.after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, f"{self.path} (now)", f"{self.path} (after)"))


@dataclass(frozen=True)
class IntegrationPlan:
    uninstall: bool
    changes: tuple[FileChange, ...]

    @property
    def changed(self) -> bool:
        return any(change.changed for change in self.changes)

    def diff(self) -> str:
        return "".join(change.diff() for change in self.changes if change.changed)


def _restored(path: Path, before: bytes | None, cleaned: Json, original: Json) -> bytes | None:
    """What ``path`` becomes once ours is out: the install backup's bytes when they say exactly
    ``cleaned`` (or nothing, if the install created the file), else ``cleaned`` rendered."""
    if cleaned == original:
        return before
    backups = backups_of(path)
    if backups:  # the newest install backup: the file as it was before crystalmesh was added
        data = read_bytes(backups[-1], MAX_SETTINGS_BYTES) or b""
        if data == b"":
            if not cleaned:
                return None
        else:
            try:
                if load_json_object(data, "the backup", MAX_SETTINGS_BYTES, MAX_SETTINGS_DEPTH) == cleaned:
                    return data
            except HookInputRefused:
                pass  # a damaged backup: the file is rendered from the merge instead
    return render(cleaned, before)


def plan_integration(settings_path: Path, mcp_path: Path | None, command: str, server: Json,
                     uninstall: bool = False) -> IntegrationPlan:
    """The files' new bytes (nothing written): hooks in ``settings_path``, the MCP server in
    ``mcp_path`` (None: leave MCP alone)."""
    changes = []
    before, settings = load_settings(settings_path)
    if uninstall:
        changes.append(FileChange(settings_path, before,
                                  _restored(settings_path, before, remove_hooks(settings), settings)))
    else:
        merged = add_hooks(settings, command)
        changes.append(FileChange(settings_path, before, before if merged == settings else render(merged, before)))
    if mcp_path is not None:
        if mcp_path == settings_path:
            raise SettingsRefused("the MCP servers file must not be the hooks' settings file")
        before, config = load_settings(mcp_path)
        if uninstall:
            changes.append(FileChange(mcp_path, before,
                                      _restored(mcp_path, before, remove_server(config, server), config)))
        else:
            merged, added = add_server(config, server)
            note = "" if added else f"kept the existing mcpServers.{MCP_SERVER_NAME} entry (not ours)"
            changes.append(FileChange(mcp_path, before, before if merged == config else render(merged, before),
                                      note))
    return IntegrationPlan(uninstall, tuple(changes))


def _stamp() -> str:
    now = time.time()
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1e6) % 1_000_000:06d}Z"


def apply_plan(plan: IntegrationPlan) -> list[Path]:
    """Write the plan's changed files (a backup of each first); the backups written."""
    backups = []
    for change in plan.changes:
        if not change.changed:
            continue
        mark = UNINSTALL_MARK if plan.uninstall else BACKUP_MARK
        backup = change.path.with_name(change.path.name + mark + _stamp())
        change.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(backup, change.before or b"")
        backups.append(backup)
        if change.after is None:
            os.unlink(change.path)
            continue
        mode = change.path.stat().st_mode & 0o777 if change.before is not None else 0o600
        atomic_write(change.path, change.after)
        os.chmod(change.path, mode)
    return backups
