"""Commands that run a node or act on a running one (through its local API)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table

# Listings per `skill publish` API call (a few signed batches): the unit of progress.
CATALOGUE_CHUNK = 128


def usdc(micro: int | None) -> str:
    if micro is None:
        return "-"
    return f"{micro / 1_000_000:.6f} USDC"


def parse_duration(text: str) -> int:
    """'90', '90s', '5m', '2h' -> seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a duration like 90s, 5m or 1h")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"s": 1, "m": 60, "h": 3600}[unit]


def parse_usdc(text: str) -> int:
    """'0.05' (USDC) -> 50000 micro-USDC, exactly (no float rounding)."""
    match = re.fullmatch(r"\s*(\d+)(?:\.(\d{1,6}))?\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a USDC amount like 0.05 (at most 6 decimals)")
    whole, fraction = match.group(1), (match.group(2) or "").ljust(6, "0")
    return int(whole) * 1_000_000 + int(fraction)


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


def describe_weather(weather: dict[str, Any]) -> str:
    if not weather.get("active"):
        return "clear"
    remaining = int(weather.get("remaining_ms", 0)) // 1000
    return (f"cortisol {weather['level']:.2f} for {remaining // 60}m{remaining % 60:02d}s more"
            f" ({weather.get('reason') or 'no reason'}); untrusted ingestion halted")


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


# --- weather --------------------------------------------------------------------------------
@click.group()
def weather() -> None:
    """Network cortisol weather: status, and broadcast on a management node."""


@weather.command("broadcast")
@click.option("--level", type=click.FloatRange(0.0, 1.0), required=True, help="Cortisol level 0..1.")
@click.option("--duration", default="5m", show_default=True, help="How long: 90s, 5m, 1h.")
@click.option("--reason", default="", help="Why (shown to operators, ≤ 280 chars).")
@common_options
def weather_broadcast(ctx: CliContext, level: float, duration: str, reason: str) -> None:
    """Sign and gossip a weather alert (management nodes only)."""
    client = ctx.api()
    assert client is not None
    data = client.post("/v1/weather/broadcast",
                       {"level": level, "duration_s": parse_duration(duration), "reason": reason})
    ctx.emit(data, lambda d: click.echo(
        f"broadcast cortisol {d['level']:.2f} until "
        f"{datetime.fromtimestamp(d['expires_at_ms'] / 1000, UTC):%H:%M:%S} UTC"))


@weather.command("status")
@common_options
def weather_status(ctx: CliContext) -> None:
    """The weather this node obeys now."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/weather")
    ctx.emit(data, lambda d: click.echo(describe_weather(d)))


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
    client = ctx.api(required=False)
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
    client = ctx.api(required=False)
    if client is not None:
        data = client.post(f"/v1/skills/{crystal_id}/versions", {"text": text})
    else:
        from node.cli.memory import open_memory

        with open_memory(ctx) as mem:
            data = mem.new_skill_version(crystal_id, text).to_dict()
    ctx.emit(data, lambda c: click.echo(f"{c['id']}  v{c['skillVersion']} of {c['stableSkillId']}"))


@skill.command("publish")
@click.argument("crystal_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True,
              help="Every listable skill of this node that was never listed.")
@click.option("--name", default=None, help="Listing name (default: the skill's first few words).")
@click.option("--summary", default=None,
              help="What buyers read before paying, up to 1024 characters (default: category and "
                   "tags). The skill itself goes only to paying buyers.")
@common_options
def publish(ctx: CliContext, crystal_ids: tuple[str, ...], everything: bool, name: str | None,
            summary: str | None) -> None:
    """Announce skills on the network (quality gates apply; priced automatically).

    One id: that skill (with --name/--summary). Several ids, or --all: a catalogue, carried in
    signed batches (about 80 listings each), with progress, e.g. `crystalmesh skill publish --all`.
    """
    client = ctx.api()
    assert client is not None
    if len(crystal_ids) == 1 and not everything:
        data = client.post(f"/v1/skills/{crystal_ids[0]}/publish", {"name": name, "summary": summary})
        ctx.emit(data, lambda d: click.echo(
            f"listed {d['listing_id']} at {usdc(d['price_micro_usdc'])} (v{d['skill_version']})"))
        return
    if bool(crystal_ids) == everything or name is not None or summary is not None:
        raise CliError("give one crystal id (with --name/--summary), several ids, or --all")
    published: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    pending = list(crystal_ids)
    while True:
        body: dict[str, Any] = ({"all": True} if everything
                                else {"crystal_ids": pending[:CATALOGUE_CHUNK]})
        data = client.post("/v1/skills/publish", body | {"limit": CATALOGUE_CHUNK})
        published += data["published"]
        failed += data["failed"]
        pending = pending[CATALOGUE_CHUNK:]
        if not ctx.as_json:
            click.echo(f"published {len(published)} (failed {len(failed)}, "
                       f"{data['remaining']} to go)", err=True)
        if not data["published"] or data["remaining"] == 0:
            break
    def human(data: dict[str, Any]) -> None:
        for item in data["failed"]:
            click.echo(f"not listed {item['crystal_id']}: {item['error']}")
        click.echo(f"listed {len(data['published'])} skills")

    ctx.emit({"published": published, "failed": failed}, human)


# --- market ---------------------------------------------------------------------------------
@click.group()
def market() -> None:
    """Skill listings known to this node."""


def _render_listings(items: list[dict[str, Any]]) -> None:
    if not items:
        click.echo("no listings")
        return
    bounties = any("bounty_matches" in i for i in items)
    table(None, ["listing id", "name", "category", "price", "success", "seller", "v"]
          + (["bounties"] if bounties else []),
          [[i["listing_id"][:16], i["name"][:40], i["category"], usdc(i["price_micro_usdc"]),
            f"{i['success_rate']:.0%}", ("me" if i["own"] else i["seller_key"][:10]),
            i["skill_version"]] + ([i.get("bounty_matches", 0)] if bounties else [])
           for i in items])


@market.command("list")
@click.option("--category", default=None)
@click.option("--max-price", default=None, help="Max price in USDC, e.g. 0.05.")
@click.option("--tag", "tags", multiple=True)
@common_options
def market_list(ctx: CliContext, category: str | None, max_price: str | None,
                tags: tuple[str, ...]) -> None:
    """Active listings (expired and superseded ones drop out)."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/listings", category=category,
                      max_price=parse_usdc(max_price) if max_price else None, tag=list(tags) or None)
    ctx.emit(data["listings"], _render_listings)


@market.command("search")
@click.argument("query")
@click.option("-k", "--limit", "k", type=int, default=10)
@click.option("--category", default=None)
@click.option("--max-price", default=None, help="Max price in USDC, e.g. 0.05.")
@click.option("--tag", "tags", multiple=True)
@common_options
def market_search(ctx: CliContext, query: str, k: int, category: str | None,
                  max_price: str | None, tags: tuple[str, ...]) -> None:
    """Semantic search over known listings (name, description, tags)."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/listings/search", q=query, k=k, category=category,
                      max_price=parse_usdc(max_price) if max_price else None,
                      tag=list(tags) or None)
    ctx.emit(data["listings"], _render_listings)


def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return False


COMMANDS: list[click.Command] = [run, status, peers, weather, skill, market]
