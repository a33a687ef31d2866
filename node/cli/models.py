"""``crystalmesh models ...``: the local embedding model."""

from __future__ import annotations

import click

from node.cli.context import CliContext, common_options


@click.group()
def models() -> None:
    """Build and inspect the local embedding model."""


@models.command("build")
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option(
    "--embedder",
    type=click.Choice(["minilm", "mpnet", "l3"]),
    default="minilm",
    show_default=True,
    help="mpnet: the opt-in all-mpnet-base-v2, from its installed weight packages (scripts/setup --mpnet); "
    "l3: paraphrase-MiniLM-L3-v2, the default embedder's second opinion.",
)
@common_options
def build(ctx: CliContext, quiet: bool, embedder: str) -> None:
    """Build the ONNX embedder from its packaged weights (cached; fast when present)."""
    from node.memory import build_default_model

    path = build_default_model(quiet=quiet or ctx.as_json, embedder=embedder)
    ctx.emit({"model": str(path)}, lambda r: None if quiet else click.echo(f"model ready: {r['model']}"))
