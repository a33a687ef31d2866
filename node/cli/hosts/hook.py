"""``crystalmesh hook …``: what an agent host's hooks run, and the worker they start.

``hook claude-code`` and ``hook codex`` are normally answered by ``node.cli.hosts.fast``
before this command tree is imported; these commands are the same calls for the
invocations the fast path leaves to click (``--node``, ``--help``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

import click

from node.cli.context import CliContext, common_options, table, when
from node.cli.hosts.fast import claude_code_hook, codex_hook, log_to_capture_file
from node.cli.local import LocalNode

log = logging.getLogger("node.capture.worker")


@click.group("hook")
def hook() -> None:
    """What agent hosts call (installed by `crystalmesh integrate claude-code`)."""


@hook.command("claude-code")
@click.option("--namespace", default="default", show_default=True, help="Namespace the session goes to.")
@common_options
def hook_claude_code(ctx: CliContext, namespace: str) -> None:
    """Claude Code's command hook: reads the hook JSON on stdin. SessionStart prints the working
    memory as additionalContext; PreCompact/Stop/SessionEnd queue the transcript. Exit 0 always.

    \f
    Example: ``echo '{"hook_event_name": "SessionStart", "session_id": "s1"}' | crystalmesh hook claude-code``
    """
    try:
        output = claude_code_hook(ctx.resolve_data_dir(), namespace, sys.stdin.buffer.read(1 << 20))
    except Exception as error:
        click.echo(f"hook claude-code: {error}", err=True)
        return
    if output is not None:
        click.echo(output, nl=False)


@hook.command("codex")
@click.argument("notification")
@click.option("--namespace", default="default", show_default=True, help="Namespace the session goes to.")
@common_options
def hook_codex(ctx: CliContext, notification: str, namespace: str) -> None:
    """Codex's notify program: NOTIFICATION is its JSON; the thread's rollout is queued."""
    try:
        codex_hook(ctx.resolve_data_dir(), namespace, notification)
    except Exception as error:
        click.echo(f"hook codex: {error}", err=True)


@hook.command("drain")
@common_options
def hook_drain(ctx: CliContext) -> None:
    """Store every queued transcript now (what the hooks start in the background); a failure
    stays queued for the next run."""
    from node.capture import CaptureQueue, drain_queue

    data_dir = ctx.resolve_data_dir()
    log_to_capture_file(data_dir)
    with contextlib.suppress(OSError):
        os.nice(10)  # background work: the host and its next hook come first

    def open_client() -> Any:
        client = ctx.client()
        log.info("capture worker: storing through %s", "the data dir (no node running)"
                 if isinstance(client, LocalNode) else "the node's API")
        return client

    report = drain_queue(CaptureQueue(data_dir), open_client, data_dir)
    ctx.emit(report.to_dict(), _show_drain)


def _show_drain(report: dict[str, Any]) -> None:
    if report["busy"]:
        click.echo("another worker is draining the queue")
        return
    click.echo(f"{report['stored']} stored ({report['added']} new turns), {report['failed']} kept for "
               f"the next run, {report['dropped']} dropped (transcript gone)")


@hook.command("status")
@common_options
def hook_status(ctx: CliContext) -> None:
    """What the capture queue holds and where its log is."""
    from node.capture import CaptureQueue, capture_log

    data_dir = ctx.resolve_data_dir()
    queue = CaptureQueue(data_dir)
    entries = [entry.__dict__ for entry in queue.read()]
    ctx.emit({"queue": str(queue.path), "log": str(capture_log(data_dir)), "pending": entries},
             _show_status)


def _show_status(status: dict[str, Any]) -> None:
    click.echo(f"queue: {status['queue']}\nlog:   {status['log']}")
    rows = [[when(entry["at_ms"]), entry["host"], entry["event"], entry["session_id"], entry["attempts"],
             entry["error"] or ""] for entry in status["pending"]]
    if rows:
        table("pending transcripts", ["queued", "host", "event", "session", "attempts", "last error"], rows)
    else:
        click.echo("nothing pending")
