"""``crystalmesh devnet ...``: a local network of node processes and a chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, stderr, table, usdc
from node.cli.weather import describe_weather


@click.group()
def devnet() -> None:
    """Start, inspect and stop a local devnet (anvil + N nodes + a management node)."""


@devnet.command("up")
@click.option("-n", "count", type=int, default=3, show_default=True, help="Edge nodes to start.")
@click.option("--embedder", type=click.Choice(["minilm", "hashing"]), default="minilm",
              show_default=True, help="Embedding model for every node.")
@click.option("--no-chain", is_flag=True, help="Skip the local chain (gossip only).")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True)
@common_options
def up(ctx: CliContext, count: int, embedder: str, no_chain: bool, timeout_s: float) -> None:
    """Start the devnet and wait until every node is connected."""
    from node.devnet import manager

    state = manager.up(count, ctx.devnet_dir, embedder=embedder, with_chain=not no_chain,
                       progress=stderr if not ctx.as_json else (lambda _: None),
                       timeout_s=timeout_s)
    data = manager.status(Path(state.dir))
    ctx.emit(data, _render_status)
    if not ctx.as_json:
        click.echo(f"\ndevnet dir: {state.dir}")
        click.echo("open a dashboard (one-time login link): crystalmesh --node node-1 dashboard")
        click.echo("stop it with: crystalmesh devnet down")


@devnet.command("down")
@common_options
def down(ctx: CliContext) -> None:
    """Stop the processes the devnet started (by pid)."""
    from node.devnet import manager

    data = manager.down(ctx.devnet_dir)
    ctx.emit(data, lambda d: click.echo(
        f"stopped {', '.join(d['stopped']) or 'nothing (already stopped)'} in {d['dir']}"))


@devnet.command("restart")
@click.argument("name")
@common_options
def restart(ctx: CliContext, name: str) -> None:
    """Restart one node (e.g. node-1, management) or the chain ("chain"), keeping its data:
    recovers a node or chain that was killed."""
    from node.devnet import manager

    data = manager.restart(name, ctx.devnet_dir, progress=lambda line: click.echo(line, err=True))
    ctx.emit(data, lambda d: click.echo(f"restarted {d['restarted']} (pid {d['pid']})"))


@devnet.command("add")
@click.argument("name")
@click.option("--timeout", "timeout_s", type=float, default=90.0, show_default=True)
@common_options
def add(ctx: CliContext, name: str, timeout_s: float) -> None:
    """Start one more node on the running devnet (bootstrapped, funded, management key set);
    it catches up with existing listings through the listings sync protocol."""
    from node.devnet import add as add_node

    data = add_node(name, ctx.devnet_dir, timeout_s=timeout_s,
                    progress=stderr if not ctx.as_json else (lambda _: None))
    ctx.emit(data, lambda d: click.echo(
        f"added {d['name']} peer {d['peer_id']} api port {d['api_port']} "
        f"(bootstrapped from {len(d['bootstrap'])} nodes)"))


@devnet.command("status")
@common_options
def status(ctx: CliContext) -> None:
    """Nodes, peer ids, API ports, peers, listings, weather, balances."""
    from node.devnet import manager

    ctx.emit(manager.status(ctx.devnet_dir), _render_status)


def _render_status(data: dict[str, Any]) -> None:
    chain = data.get("chain")
    if chain:
        click.echo(f"chain  {chain['rpc_url']}  id {chain['chain_id']}  USDC {chain['token_address']}"
                   f"  {'running' if chain['running'] else 'STOPPED'}")
    table(None, ["node", "peer id", "dashboard", "x402", "peers", "listings", "USDC", "weather"],
          [[n["name"], n["peer_id"][:20] + "…", n["dashboard"] if n["running"] else "STOPPED",
            n.get("x402_url") or "-", n["connected_peers"], n["listings_known"],
            usdc(n.get("usdc_micro")),
            describe_weather(n["weather"]) if n["weather"] else "-"] for n in data["nodes"]])


@devnet.command("logs")
@click.argument("name")
@click.option("-n", "--lines", type=int, default=50, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
@common_options
def logs(ctx: CliContext, name: str, lines: int, follow: bool) -> None:
    """Print a devnet node's log (NAME: management, node-1, …, or chain)."""
    import time

    from node.devnet import load_state

    state = load_state(ctx.devnet_dir)
    if name == "chain":
        if not state.chain:
            raise CliError("this devnet has no chain")
        path = Path(state.chain.log)
    else:
        path = Path(state.node(name).data_dir) / "node.log"
    if not path.exists():
        raise CliError(f"{path} does not exist yet")
    with path.open(errors="replace") as handle:
        for line in handle.readlines()[-lines:]:
            click.echo(line.rstrip("\n"))
        while follow:
            line = handle.readline()
            if line:
                click.echo(line.rstrip("\n"))
            else:
                time.sleep(0.2)
