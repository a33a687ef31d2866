"""``crystalmesh models ...``: the local embedding model."""

from __future__ import annotations

import click

from node.cli.context import CliContext, common_options


@click.group()
def models() -> None:
    """Build and inspect the local embedding model."""


@models.command("build")
@click.option("--quiet", is_flag=True, help="No progress output.")
@common_options
def build(ctx: CliContext, quiet: bool) -> None:
    """Build the ONNX MiniLM embedder from the bundled weights (cached; fast when present)."""
    from node.memory.embedder import build_default_model

    path = build_default_model(quiet=quiet or ctx.as_json)
    ctx.emit({"model": str(path)}, lambda r: None if quiet else click.echo(f"model ready: {r['model']}"))
