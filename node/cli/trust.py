"""``crystalmesh trust ...``: what this node believes about its peers."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, table


@click.group()
def trust() -> None:
    """Peer trust (EigenTrust over signed reports) and the ingestion gate."""


def _score(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


@trust.command("show")
@common_options
def trust_show(ctx: CliContext) -> None:
    """Every peer this node has evidence about: local, global, level, last reason."""
    ctx.emit(ctx.api().trust_rows(), lambda items: table(
        None, ["peer", "local", "global", "reputation", "level", "last reason"],
        [[r["peer_id"][:20] + "…", _score(r["local"]), _score(r["global"]), _score(r["reputation"]),
          r["level"], r.get("last_reason") or "-"] for r in items]) if items
        else click.echo("no evidence about any peer yet"))
