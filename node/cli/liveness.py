"""The living market from the command line: ``skill unpublish|reprice``,
``market refresh|sync`` and ``bounty post|list|status|fulfil``."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, parse_duration, parse_usdc, table, usdc
from node.cli.network import skill


@skill.command("unpublish")
@click.argument("listing_id")
@common_options
def unpublish(ctx: CliContext, listing_id: str) -> None:
    """Withdraw a listing of this node: every node drops it (signed listing_withdrawal)."""
    client = ctx.api()
    assert client is not None
    data = client.post(f"/v1/listings/{listing_id}/withdraw", {})
    ctx.emit(data, lambda d: click.echo(f"withdrew {d['listing_id'][:16]} "
                                        f"(skill {d['stable_skill_id'][:12]} v{d['skill_version']})"))


@skill.command("reprice")
@click.argument("listing_id")
@click.option("--price", default=None,
              help="Fixed price in USDC (kept on refreshes); without it, a fresh quote.")
@common_options
def reprice(ctx: CliContext, listing_id: str, price: str | None) -> None:
    """Re-announce a listing at a new price; its listing id and execution stats stay."""
    client = ctx.api()
    assert client is not None
    data = client.post(f"/v1/listings/{listing_id}/reprice",
                       {"price_micro_usdc": parse_usdc(price) if price else None})
    ctx.emit(data, lambda d: click.echo(
        f"re-announced {d['listing_id'][:16]} at {usdc(d['price_micro_usdc'])}"
        f" (bounty matches {d['bounty_matches']})"))


@click.group()
def bounty() -> None:
    """Bounties: ask the network for a skill, with a reward; matching listings price up."""


def _render(items: list[dict[str, Any]]) -> None:
    if not items:
        click.echo("no bounties")
        return
    table(None, ["bounty id", "text", "reward", "status", "matches", "poster"],
          [[b["bounty_id"][:12], b["text"][:48], usdc(b["reward_micro_usdc"]), b["status"],
            b.get("match_count", len(b.get("matches", []))),
            "me" if b["own"] else b["poster_key"][:10]] for b in items])


@bounty.command("post")
@click.argument("text")
@click.option("--reward", required=True, help="Reward in USDC, e.g. 0.05 (stored as micro-USDC).")
@click.option("--ttl", default=None, help="How long it stays open, e.g. 3600, 90m, 48h.")
@common_options
def post(ctx: CliContext, text: str, reward: str, ttl: str | None) -> None:
    """Post a bounty: "need: a skill that ..." (gossiped on /crystalmesh/1/bounties)."""
    client = ctx.api()
    assert client is not None
    data = client.post("/v1/bounties", {"text": text, "reward_micro_usdc": parse_usdc(reward),
                                        "ttl_s": parse_duration(ttl) if ttl else None})
    ctx.emit(data, lambda d: click.echo(
        f"posted bounty {d['bounty_id']} reward {usdc(d['reward_micro_usdc'])}, "
        f"{len(d['matches'])} matching listings now"))


@bounty.command("list")
@click.option("--open", "only_open", is_flag=True, help="Hide fulfilled and expired bounties.")
@common_options
def bounty_list(ctx: CliContext, only_open: bool) -> None:
    """Bounties known to this node, with their status and matching listings."""
    client = ctx.api()
    assert client is not None
    data = client.get("/v1/bounties", open="true" if only_open else None)
    ctx.emit(data["bounties"], _render)


@bounty.command("status")
@click.argument("bounty_id")
@common_options
def bounty_status(ctx: CliContext, bounty_id: str) -> None:
    """One bounty: status, reward, and the listings that match it (best first)."""
    client = ctx.api()
    assert client is not None
    data = client.get(f"/v1/bounties/{bounty_id}")

    def render(d: dict[str, Any]) -> None:
        click.echo(f"{d['bounty_id']}  {d['status']}  reward {usdc(d['reward_micro_usdc'])}\n"
                   f"  {d['text']}" + (f"\n  fulfilled by {d['fulfilled_by']}"
                                       if d["fulfilled_by"] else ""))
        table(None, ["listing id", "name", "price", "score"],
              [[m["listing_id"][:16], m["name"][:40], usdc(m["price_micro_usdc"]), m["score"]]
               for m in d["matches"]])
    ctx.emit(data, render)


@bounty.command("fulfil")
@click.argument("bounty_id")
@click.option("--listing", "listing_id", default=None, help="Buy this matching listing.")
@common_options
def fulfil(ctx: CliContext, bounty_id: str, listing_id: str | None) -> None:
    """Fulfil your bounty: buy the best matching listing within the reward, then close it."""
    client = ctx.api()
    assert client is not None
    data = client.post(f"/v1/bounties/{bounty_id}/fulfil", {"listing_id": listing_id})
    ctx.emit(data, lambda d: click.echo(
        f"bounty {d['bounty_id'][:12]} fulfilled by {d['fulfilled_by'][:16]} "
        f"(paid {usdc(d['purchase']['price_micro_usdc'])}, tx {d['purchase']['tx_hash']})"))


COMMANDS: list[click.Command] = [bounty]
