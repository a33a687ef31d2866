"""``crystalmesh memory feedback|session end|export --testament|context --budget-tokens``.

Seed 003/004 commands (docs/memory.md). Like the rest of ``memory``, they go
through the running node's API when there is one, else open the store
directly. Testament bytes travel base64 in the API body, so the node never
reads or writes a path a request names.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table


@contextmanager
def _learning(ctx: CliContext) -> Iterator[tuple[Any, Any]]:
    from node.cli.memory import open_memory

    with open_memory(ctx) as mem:
        yield mem, mem.learning


def _local_or_api(ctx: CliContext, path: str, body: dict[str, Any], local: Callable[[Any, Any], Any]) -> Any:
    client = ctx.running()
    if client is not None:
        return client.post(path, body)
    with _learning(ctx) as (mem, learning):
        return local(mem, learning)


@click.command("feedback")
@click.argument("crystal_id")
@click.argument("verdict", type=click.Choice(["useful", "wrong"]))
@common_options
def feedback(ctx: CliContext, crystal_id: str, verdict: str) -> None:
    """Mark a retrieved crystal useful (confidence up) or wrong (confidence halved)."""
    result = _local_or_api(
        ctx, "/v1/memory/feedback", {"id": crystal_id, "verdict": verdict},
        lambda mem, learning: learning.feedback(crystal_id, verdict),
    )
    ctx.emit(result, lambda r: click.echo(
        f"{r['id']}  {r['verdict']}: confidence {r['confidence_before']:.3f} -> {r['confidence']:.3f}"))


@click.group("session")
def session() -> None:
    """Session boundaries (seed 004 energy tiers)."""


@session.command("end")
@common_options
def session_end(ctx: CliContext) -> None:
    """Mark a session boundary: working memories promote at energy 1.5 instead of 2.0."""
    from node.memory.learning.tiers import end_session

    result = _local_or_api(ctx, "/v1/memory/session/end", {}, lambda mem, learning: end_session(mem, learning))

    def render(r: dict[str, Any]) -> None:
        tiers = r.get("tiers")
        if tiers is None:
            click.echo(f"session boundary recorded (policy {r['policy']}: tiers do not move)")
        else:
            click.echo(f"session boundary: {len(tiers['promoted'])} promoted, {len(tiers['expired'])} expired")

    ctx.emit(result, render)


@click.command("export")
@click.option("--testament", "testament", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write a signed testament (at most 2,048 entries) to this file.")
@common_options
def export(ctx: CliContext, testament: Path) -> None:
    """Export this node's distilled knowledge as a signed testament for a successor."""
    client = ctx.running()
    if client is not None:
        answer = client.post("/v1/memory/testament/export", {})
        data = base64.b64decode(answer.pop("testament_b64"))
        from node.memory.learning.testament_io import write_private

        write_private(testament, data)
        result = answer | {"path": str(testament)}
    else:
        from node.keys import load_identity
        from node.memory.learning.testament_io import export_testament

        with _learning(ctx) as (mem, learning):
            result = export_testament(mem, learning, load_identity(mem.config), testament)
            result.pop("data")
    ctx.emit(result, lambda r: click.echo(
        f"{r['entries']} entries ({', '.join(f'{k} {v}' for k, v in sorted(r['kinds'].items())) or 'none'}), "
        f"{r['bytes']} bytes, signed by {r['signer']} -> {r['path']}"))


def render_context(result: dict[str, Any]) -> None:
    click.echo(result["text"])
    click.echo(f"\n-- {result['used_tokens']}/{result['budget_tokens']} tokens", err=True)
    if result["evicted"]:
        table("evicted", ["id", "kind", "reason", "tokens"],
              [[e["id"][:8], e["kind"], e["reason"], e["tokens"]] for e in result["evicted"]])


def budget_context_command(ctx: CliContext, query: str, budget_tokens: int, working: str | None) -> None:
    """``memory context --query Q --budget-tokens N``: typed blocks within the budget."""
    from node.memory.learning.budget_context import budget_context

    result = _local_or_api(
        ctx, "/v1/memory/context/budget",
        {"query": query, "budget_tokens": budget_tokens, "working_memory": working},
        lambda mem, learning: budget_context(mem, learning, query, budget_tokens, working).to_dict(),
    )
    ctx.emit(result, render_context)


QUERY = click.Option(["--query"], default=None, help="Assemble typed blocks for this query (needs --budget-tokens).")
BUDGET = click.Option(["--budget-tokens", "budget_tokens"], type=click.IntRange(0, 1_000_000), default=None,
                      help="Token budget: warnings, facts, episodes, skills and working memory within it.")


@click.command("context")
@common_options
def budget_context_cli(ctx: CliContext, query: str | None, budget_tokens: int | None) -> None:
    """Typed memory blocks for --query within --budget-tokens (seed 003)."""
    if query is None or budget_tokens is None:
        raise CliError("memory context needs --query and --budget-tokens")
    budget_context_command(ctx, query, budget_tokens, None)


budget_context_cli.params[:0] = [QUERY, BUDGET]


def _extend_working_context(command: click.Command) -> None:
    """Give the working-memory ``memory context`` (seed 001) the budgeted mode as two options.

    Without ``--budget-tokens`` it behaves as before; with it, its working
    memory becomes the first block of the budgeted context.
    """
    original = command.callback
    assert original is not None
    command.params[:0] = [QUERY, BUDGET]

    @functools.wraps(original)
    def callback(*args: Any, query: str | None = None, budget_tokens: int | None = None, **kwargs: Any) -> Any:
        if budget_tokens is None and query is None:
            return original(*args, **kwargs)
        if query is None or budget_tokens is None:
            raise CliError("the budgeted context needs both --query and --budget-tokens")
        # the wrapped command's own --data-dir/--json/... handling is bypassed here
        ctx = click.get_current_context().ensure_object(CliContext)
        ctx.as_json = ctx.as_json or bool(kwargs.get("as_json"))
        ctx.get = kwargs.get("get") or ctx.get
        ctx.data_dir = kwargs.get("data_dir") or ctx.data_dir
        ctx.node_name = kwargs.get("node_name") or ctx.node_name
        ctx.devnet_dir = kwargs.get("devnet_dir") or ctx.devnet_dir
        working = _working_memory_text(ctx, kwargs)
        return budget_context_command(ctx, query, budget_tokens, working)

    command.callback = callback


def _working_memory_text(ctx: CliContext, options: dict[str, Any]) -> str | None:
    window, namespace = options.get("window_tokens"), options.get("namespace")
    client = ctx.running()
    if client is not None:
        return str(client.get("/v1/memory/context", window=window, namespace=namespace).get("context") or "")
    from node.cli.working_memory import open_working_memory  # seed 001, when present

    with open_working_memory(ctx, namespace or "default") as working:
        return str(working.context(window))


def register(group: click.Group) -> None:
    """Add the commands to the ``memory`` group (after the working-memory ones, if any)."""
    for command in (feedback, session, export):
        group.add_command(command)
    existing = group.commands.get("context")
    if existing is None:
        group.add_command(budget_context_cli)
    else:
        _extend_working_context(existing)
