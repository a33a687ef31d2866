"""Commands that run a node or act on a running one (through its local API)."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table, usdc
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


# --- skills ---------------------------------------------------------------------------------
@click.group()
def skill() -> None:
    """Record skill executions, version skills, publish and buy them."""


@skill.command("record-execution")
@click.argument("crystal_id")
@click.option("--success/--failure", required=True, help="Outcome of the run.")
@click.option("--reward", type=click.FloatRange(0.0, 1.0), default=None,
              help="Reward score 0..1 (default 1 on success, 0 on failure).")
@common_options
def record_execution(ctx: CliContext, crystal_id: str, success: bool, reward: float | None) -> None:
    """Record one execution outcome of a skill (feeds quality gates and price)."""
    client = ctx.running()
    if client is not None:
        data = client.post(f"/v1/skills/{crystal_id}/executions", {"success": success, "reward": reward})
    else:
        from node.cli.memory import open_memory

        with open_memory(ctx) as mem:
            data = mem.record_execution(crystal_id, success, reward).to_dict()
    ctx.emit(data, lambda c: click.echo(
        f"{c['id'][:8]}: {c['successes']}/{c['executions']} successful, reward sum {c['rewardSum']:.2f}"))


@skill.command("new-version")
@click.argument("crystal_id")
@click.argument("text")
@common_options
def new_version(ctx: CliContext, crystal_id: str, text: str) -> None:
    """Create the next version of a skill; the old one is deprecated."""
    client = ctx.running()
    if client is not None:
        data = client.post(f"/v1/skills/{crystal_id}/versions", {"text": text})
    else:
        from node.cli.memory import open_memory

        with open_memory(ctx) as mem:
            data = mem.new_skill_version(crystal_id, text).to_dict()
    ctx.emit(data, lambda c: click.echo(f"{c['id']}  v{c['skillVersion']} of {c['stableSkillId']}"))


@skill.command("publish")
@click.argument("crystal_id")
@click.option("--name", default=None, help="Listing name (default: the skill's first few words).")
@click.option("--summary", default=None,
              help="What buyers read before paying, up to 1024 characters (default: category and "
                   "tags). The skill itself goes only to paying buyers.")
@common_options
def publish(ctx: CliContext, crystal_id: str, name: str | None, summary: str | None) -> None:
    """Announce a skill on the network (quality gates apply; priced automatically)."""
    client = ctx.api()
    assert client is not None
    data = client.post(f"/v1/skills/{crystal_id}/publish", {"name": name, "summary": summary})
    ctx.emit(data, lambda d: click.echo(
        f"listed {d['listing_id']} at {usdc(d['price_micro_usdc'])} (v{d['skill_version']})"))


COMMANDS: list[click.Command] = [run, status, peers, skill]
