"""``crystalmesh bounty ...``: ask the network for a skill, with a reward."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, parse_duration, parse_usdc, table, usdc


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
    """Post a bounty: "need: a skill that ..." (gossiped on /crystalmesh/1/bounties).

    \f
    Example: ``crystalmesh bounty post "need: a skill that rotates TLS certs" --reward 0.05 --ttl 48h``
    """
    data = ctx.api().post_bounty(text, parse_usdc(reward), parse_duration(ttl) if ttl else None)
    ctx.emit(data, lambda d: click.echo(
        f"posted bounty {d['bounty_id']} reward {usdc(d['reward_micro_usdc'])}, "
        f"{len(d['matches'])} matching listings now"))


@bounty.command("list")
@click.option("--open", "only_open", is_flag=True, help="Hide fulfilled and expired bounties.")
@common_options
def bounty_list(ctx: CliContext, only_open: bool) -> None:
    """Bounties known to this node, with their status and matching listings."""
    ctx.emit(ctx.api().bounties(only_open), _render)


@bounty.command("status")
@click.argument("bounty_id")
@common_options
def bounty_status(ctx: CliContext, bounty_id: str) -> None:
    """One bounty: status, reward, and the listings that match it (best first)."""

    def render(d: dict[str, Any]) -> None:
        click.echo(f"{d['bounty_id']}  {d['status']}  reward {usdc(d['reward_micro_usdc'])}\n"
                   f"  {d['text']}" + (f"\n  fulfilled by {d['fulfilled_by']}"
                                       if d["fulfilled_by"] else ""))
        table(None, ["listing id", "name", "price", "score"],
              [[m["listing_id"][:16], m["name"][:40], usdc(m["price_micro_usdc"]), m["score"]]
               for m in d["matches"]])

    ctx.emit(ctx.api().bounty(bounty_id), render)


@bounty.command("fulfil")
@click.argument("bounty_id")
@click.option("--listing", "listing_id", default=None, help="Buy this matching listing.")
@common_options
def fulfil(ctx: CliContext, bounty_id: str, listing_id: str | None) -> None:
    """Fulfil your bounty: buy the best matching listing within the reward, then close it."""
    ctx.emit(ctx.api().fulfil_bounty(bounty_id, listing_id), lambda d: click.echo(
        f"bounty {d['bounty_id'][:12]} fulfilled by {d['fulfilled_by'][:16]} "
        f"(paid {usdc(d['purchase']['price_micro_usdc'])}, tx {d['purchase']['tx_hash']})"))
