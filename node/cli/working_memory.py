"""``crystalmesh memory note|dream|context``: working memory (seed 001).

Like the other memory commands they go through the running node's API when
there is one (it owns the index), and open the data dir directly otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from node.cli.context import CliContext, common_options
from node.cli.memory import open_memory
from node.memory.working.scratch import DEFAULT_IMPORTANCE
from node.memory.working.state import DEFAULT_WINDOW_TOKENS
from node.memory.working.working import DEFAULT_NAMESPACE

namespace_option = click.option(
    "--namespace", default=DEFAULT_NAMESPACE, show_default=True,
    help="Working-memory namespace (<data dir>/memory/<namespace>/).")


@contextmanager
def open_working_memory(ctx: CliContext, namespace: str) -> Iterator[Any]:
    from node.market.selling.niche import niche_source
    from node.memory.working.build import working_memory_for

    with open_memory(ctx) as memory:
        yield working_memory_for(memory.config, memory, namespace, niche_source(memory))


@click.command("note")
@click.argument("text")
@click.option("--importance", type=click.FloatRange(0.0, 1.0), default=DEFAULT_IMPORTANCE,
              show_default=True, help="How much this matters, 0-1.")
@namespace_option
@common_options
def note(ctx: CliContext, text: str, importance: float, namespace: str) -> None:
    """Write TEXT to the scratch buffer (durable at once) and make it searchable."""
    body = {"text": text, "importance": importance, "namespace": namespace}
    client = ctx.running()
    if client is not None:
        result = client.post("/v1/memory/notes", body)
    else:
        with open_working_memory(ctx, namespace) as working:
            result = working.note(text, importance).to_dict()
    def render(r: dict[str, Any]) -> None:
        if r["crystal"] == "exists":
            click.echo(f"already remembered as {r['crystal_id']}: nothing written")
        else:
            click.echo(f"noted {r['id']} at {r['at']} (importance {r['importance']}); crystal "
                       f"{r['crystal']}" + (f" {r['crystal_id']}" if r.get("crystal_id") else ""))

    ctx.emit(result, render)


@click.command("dream")
@namespace_option
@common_options
def dream(ctx: CliContext, namespace: str) -> None:
    """Run one dream now: rewrite MEMORY.md from the old state, the scratch and new crystals."""
    client = ctx.running()
    if client is not None:
        result = client.post("/v1/memory/dream", {"namespace": namespace})
    else:
        with open_working_memory(ctx, namespace) as working:
            result = working.dream().to_dict()

    def render(r: dict[str, Any]) -> None:
        if r["status"] == "written":
            click.echo(f"MEMORY.md written ({r['state_chars']} chars, {r['synthesiser']}): "
                       f"{r['consumed_notes']} scratch notes consumed, {r['new_crystals']} new crystals, "
                       f"{len(r['pointers'])} crystal pointers")
            if r.get("reason"):
                click.echo(f"note: {r['reason']}")
        else:
            click.echo(f"{r['status']}: {r['reason']}")

    ctx.emit(result, render)


@click.command("context")
@click.option("--window", "window_tokens", type=click.IntRange(1, 10_000_000),
              default=DEFAULT_WINDOW_TOKENS, show_default=True,
              help="The model's context window in tokens (sizes the working memory).")
@namespace_option
@common_options
def context(ctx: CliContext, window_tokens: int, namespace: str) -> None:
    """Print MEMORY.md and the pending scratch notes, sized for a system prompt."""
    client = ctx.running()
    if client is not None:
        result = client.get("/v1/memory/context", window=window_tokens, namespace=namespace)
    else:
        with open_working_memory(ctx, namespace) as working:
            result = {"namespace": namespace, "window": window_tokens,
                      "context": working.context(window_tokens)}
    ctx.emit(result, lambda r: click.echo(r["context"], nl=False))


MEMORY_COMMANDS = [note, dream, context]
