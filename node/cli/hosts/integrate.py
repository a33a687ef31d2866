"""``crystalmesh integrate claude-code``: install (or remove) the capture hooks and the MCP server
in Claude Code's settings, merged into what is there (``node.capture.claude_code``)."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from node.cli.context import CliContext, CliError, common_options

if TYPE_CHECKING:
    from node.capture import IntegrationPlan


@click.group("integrate")
def integrate() -> None:
    """Connect an agent host to this node (hooks that capture sessions, the MCP server)."""


def crystalmesh_command() -> list[str]:
    """How a host runs this crystalmesh: the absolute path of the executable in use."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "crystalmesh" and argv0.is_file():
        return [str(argv0.absolute())]
    found = shutil.which("crystalmesh")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "node.cli.main"]


@integrate.command("claude-code")
@click.option("--scope", type=click.Choice(["user", "project"]), default="user", show_default=True,
              help="user: ~/.claude/settings.json and ~/.claude.json; project: .claude/settings.json "
                   "and .mcp.json in the current directory.")
@click.option("--settings", "settings_file", type=click.Path(path_type=Path), default=None,
              help="The settings file for the hooks (instead of the scope's).")
@click.option("--mcp-config", "mcp_file", type=click.Path(path_type=Path), default=None,
              help="The file for the MCP server entry (instead of the scope's).")
@click.option("--no-mcp", is_flag=True, help="Install only the hooks.")
@click.option("--namespace", default="default", show_default=True, help="Namespace sessions go to.")
@click.option("--dry-run", is_flag=True, help="Print the changes as a diff; write nothing.")
@click.option("--uninstall", is_flag=True, help="Remove exactly what integrate added.")
@common_options
def integrate_claude_code(ctx: CliContext, scope: str, settings_file: Path | None, mcp_file: Path | None,
                          no_mcp: bool, namespace: str, dry_run: bool, uninstall: bool) -> None:
    """Merge crystalmesh's hooks (SessionStart, PreCompact, Stop, SessionEnd -> `crystalmesh hook
    claude-code`) into Claude Code's settings and register `crystalmesh mcp` as an MCP server.
    Existing settings are kept; a backup is written first; a second run changes nothing.

    \f
    Example: ``crystalmesh integrate claude-code --dry-run``, then without ``--dry-run``.
    """
    from node.capture import SettingsRefused, plan_integration
    from node.memory import validate_namespace

    validate_namespace(namespace)
    base, data_args = _invocation(ctx)
    command = shlex.join([*base, *data_args, "hook", "claude-code",
                          *([] if namespace == "default" else ["--namespace", namespace])])
    server = {"type": "stdio", "command": base[0], "args": [*base[1:], *data_args, "mcp"], "env": {}}
    home, here = Path.home(), Path.cwd()
    settings_path = settings_file or (home / ".claude" / "settings.json" if scope == "user"
                                      else here / ".claude" / "settings.json")
    mcp_path = None if no_mcp else mcp_file or (home / ".claude.json" if scope == "user" else here / ".mcp.json")
    try:
        plan = plan_integration(settings_path.absolute(), mcp_path.absolute() if mcp_path else None,
                                command, server, uninstall)
    except SettingsRefused as refused:
        raise CliError(str(refused)) from None
    _finish(ctx, plan, dry_run, uninstall, command, "Restart Claude Code (or open /hooks) to load the hooks.")


def _invocation(ctx: CliContext) -> tuple[list[str], list[str]]:
    """(how a host runs this crystalmesh, the ``--data-dir`` arguments it needs)."""
    data_dir = ctx.resolve_data_dir().expanduser().absolute()
    # The host runs the hook without this shell's CRYSTALMESH_* variables: name the data dir
    # unless it is the one a bare `crystalmesh` finds there.
    data_args = [] if data_dir == Path.home() / ".crystalmesh" / "default" else ["--data-dir", str(data_dir)]
    return crystalmesh_command(), data_args


def _finish(ctx: CliContext, plan: IntegrationPlan, dry_run: bool, uninstall: bool, command: str,
            reload_hint: str) -> None:
    """Write the plan (unless a dry run) and say what changed."""
    from node.capture import MCP_SERVER_NAME, apply_plan

    if not uninstall and not ctx.config().config_path.exists():
        click.echo(f"note: {ctx.resolve_data_dir()} is not initialised yet; run `crystalmesh init` first",
                   err=True)
    if dry_run and not ctx.as_json and not ctx.get:
        click.echo(plan.diff() or "nothing to change", nl=not plan.diff())
        return
    backups = [] if dry_run else apply_plan(plan)
    result: dict[str, Any] = {
        "action": "uninstall" if uninstall else "install", "dry_run": dry_run, "changed": plan.changed,
        "files": [{"path": str(change.path), "changed": change.changed,
                   "removed": change.changed and change.after is None, "note": change.note}
                  for change in plan.changes],
        "backups": [str(path) for path in backups], "hook_command": command, "mcp_server": MCP_SERVER_NAME,
        "reload": reload_hint,
    }
    ctx.emit(result, _show)


def _show(result: dict[str, Any]) -> None:
    verb = "removed from" if result["action"] == "uninstall" else "added to"
    for item in result["files"]:
        state = (f"{verb} " if item["changed"] else "unchanged: ") + item["path"]
        click.echo(state + (" (file removed: the install had created it)" if item["removed"] else ""))
        if item["note"]:
            click.echo(f"  note: {item['note']}")
    for backup in result["backups"]:
        click.echo(f"backup: {backup}")
    if result["action"] == "install" and result["changed"]:
        click.echo(result["reload"])


@integrate.command("codex")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="Codex's config.toml (default $CODEX_HOME/config.toml, ~/.codex/config.toml).")
@click.option("--no-mcp", is_flag=True, help="Install only the notify program.")
@click.option("--namespace", default="default", show_default=True, help="Namespace sessions go to.")
@click.option("--dry-run", is_flag=True, help="Print the changes as a diff; write nothing.")
@click.option("--uninstall", is_flag=True, help="Remove exactly what integrate added.")
@common_options
def integrate_codex(ctx: CliContext, config_file: Path | None, no_mcp: bool, namespace: str, dry_run: bool,
                    uninstall: bool) -> None:
    """Set Codex CLI's `notify` program to `crystalmesh hook codex` (each finished turn queues the
    session's rollout) and add `crystalmesh mcp` as `[mcp_servers.crystalmesh]`, as marked blocks
    in config.toml (backup first; an existing notify is kept and named).

    \f
    Example: ``crystalmesh integrate codex --dry-run``
    """
    import os

    from node.capture import SettingsRefused, plan_codex
    from node.memory import validate_namespace

    validate_namespace(namespace)
    base, data_args = _invocation(ctx)
    notify = [*base, *data_args, "hook", "codex", *([] if namespace == "default" else ["--namespace", namespace])]
    server = {"command": base[0], "args": [*base[1:], *data_args, "mcp"]}
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()
    path = (config_file or home / "config.toml").absolute()
    try:
        plan = plan_codex(path, notify, server, uninstall, with_mcp=not no_mcp)
    except SettingsRefused as refused:
        raise CliError(str(refused)) from None
    _finish(ctx, plan, dry_run, uninstall, shlex.join(notify), "Codex reads config.toml when it starts.")
