"""Operator views: ``trust show`` and ``dashboard``."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, table


@click.group()
def trust() -> None:
    """Peer trust (EigenTrust over signed reports) and the ingestion gate."""


@trust.command("show")
@common_options
def trust_show(ctx: CliContext) -> None:
    """Every peer this node has evidence about: local, global, level, last reason."""
    client = ctx.api()
    assert client is not None
    rows = client.get("/v1/trust")["peers"]

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    ctx.emit(rows, lambda items: table(
        None, ["peer", "local", "global", "reputation", "level", "last reason"],
        [[r["peer_id"][:20] + "…", fmt(r["local"]), fmt(r["global"]), fmt(r["reputation"]),
          r["level"], r.get("last_reason") or "-"] for r in items]) if items
        else click.echo("no evidence about any peer yet"))


@click.command()
@common_options
def dashboard(ctx: CliContext) -> None:
    """Print a one-time login URL for this node's web dashboard (works once, within 60 s)."""
    client = ctx.api()
    assert client is not None
    url = client.base_url + client.post("/v1/dashboard/login-link")["path"]
    ctx.emit({"url": url, "dashboard": f"{client.base_url}/dashboard"},
             lambda d: click.echo(d["url"]))


COMMANDS: list[click.Command] = [trust, dashboard]
