"""``crystalmesh memory reembed``: move a data dir's vectors to another embedder, all or nothing."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, stderr
from node.memory.embedding.embedder import EMBEDDER_NAMES


@click.command("reembed")
@click.option(
    "--embedder", "key", required=True, type=click.Choice(EMBEDDER_NAMES), help="Target embedder."
)
@common_options
def reembed(ctx: CliContext, key: str) -> None:
    """Re-embed every crystal with another embedder and rebuild the index (stop the node first).

    The new vectors (and their second opinion's, see memory.second_opinion) are
    computed aside and committed in one transaction; an interrupted run leaves the
    data dir on its old embedder. To the store's own embedder, it writes the
    vectors a store made by an older version lacks.
    """
    from node.memory.reembed import reembed as run_reembed

    config = ctx.config()
    if not config.config_path.exists():
        raise CliError(f"{config.data_dir} is not initialised; run `crystalmesh init` first")
    if ctx.running() is not None:
        raise CliError(f"a node is running on {config.data_dir}; stop it before re-embedding")

    def progress(done: int, total: int) -> None:
        stderr(f"reembedding {done}/{total}")

    report = run_reembed(config, key, progress=progress)

    def render(data: dict[str, Any]) -> None:
        click.echo(
            f"re-embedded {data['crystals']} crystals: {data['old_embedder']} -> "
            f"{data['new_embedder']} ({data['dim']}-d) in {data['total_s']:.1f} s"
            + (f"; second opinion: {data['second_opinion']}" if data["second_opinion"] else "")
        )

    ctx.emit(asdict(report), render)
