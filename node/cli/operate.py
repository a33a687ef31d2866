"""Operator view: ``dashboard``."""

from __future__ import annotations

import click

from node.cli.context import CliContext, common_options


@click.command()
@common_options
def dashboard(ctx: CliContext) -> None:
    """Print a one-time login URL for this node's web dashboard (works once, within 60 s)."""
    client = ctx.api()
    assert client is not None
    url = client.base_url + client.post("/v1/dashboard/login-link")["path"]
    ctx.emit({"url": url, "dashboard": f"{client.base_url}/dashboard"},
             lambda d: click.echo(d["url"]))


COMMANDS: list[click.Command] = [dashboard]
