"""Commands that run a node or act on a running one (through its local API)."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table
from node.cli.weather import describe_weather


@click.command()
@common_options
def run(ctx: CliContext) -> None:
    """Run this node in the foreground (Ctrl-C stops it gracefully)."""
    import trio

    from node.api.client import running_node
    from node.logs import setup_logging
    from node.service import NodeService

    config = ctx.config()
    if not config.identity_path.exists():
        raise CliError(f"{config.data_dir} is not initialised; run `crystalmesh init` first")
    if running_node(config) is not None:
        raise CliError(f"a node is already running on {config.data_dir}")
    setup_logging(config, debug=ctx.debug)
    service = NodeService(config)
    trio.run(service.run)


@click.command()
@common_options
def status(ctx: CliContext) -> None:
    """Status of the running node: peer id, peers, listings, weather."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/status")

    def render(s: dict[str, Any]) -> None:
        click.echo(f"node         {s['name']}{'  (management)' if s['management'] else ''}")
        click.echo(f"peer id      {s['peer_id']}")
        click.echo(f"listen       {', '.join(s['listen_addrs'])}")
        click.echo(f"api          http://127.0.0.1:{s['api_port']}")
        if s.get("x402_url"):
            click.echo(f"x402         {s['x402_url']}/x402/skills  (public, unauthenticated)")
        click.echo(f"peers        {s['connected_peers']} connected")
        click.echo(f"listings     {s['listings_known']} known")
        click.echo(f"crystals     {s['crystals']}")
        click.echo(f"wallet       {s['wallet_address']}")
        click.echo(f"weather      {describe_weather(s['weather'])}")

    ctx.emit(data, render)


@click.command()
@common_options
def peers(ctx: CliContext) -> None:
    """Peers of the running node."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/peers")["peers"]
    ctx.emit(data, lambda items: table(
        None, ["peer id", "connected", "score", "addrs"],
        [[p["peer_id"], p["connected"], f"{p.get('score', 0):.2f}", " ".join(p.get("addrs", [])[:1])]
         for p in items]))


COMMANDS: list[click.Command] = [run, status, peers]
