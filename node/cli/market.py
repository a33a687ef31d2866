"""``crystalmesh market ...``: the skill listings this node knows, and its trade figures."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, parse_usdc, table, usdc


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
    listings = ctx.api().listings(category, parse_usdc(max_price) if max_price else None, tags)
    ctx.emit(listings, _render_listings)


@market.command("search")
@click.argument("query")
@click.option("-k", "--limit", "k", type=int, default=10)
@click.option("--category", default=None)
@click.option("--max-price", default=None, help="Max price in USDC, e.g. 0.05.")
@click.option("--tag", "tags", multiple=True)
@common_options
def market_search(ctx: CliContext, query: str, k: int, category: str | None,
                  max_price: str | None, tags: tuple[str, ...]) -> None:
    """Semantic search over known listings (name, description, tags).

    \f
    Example: ``crystalmesh market search "recover a postgres replica" --max-price 0.05``
    """
    listings = ctx.api().search_listings(query, k, category, parse_usdc(max_price) if max_price else None, tags)
    ctx.emit(listings, _render_listings)


@market.command("refresh")
@common_options
def market_refresh(ctx: CliContext) -> None:
    """Re-announce now this node's listings that are due (the node also does it hourly)."""
    ctx.emit(ctx.api().refresh_listings(), lambda d: click.echo(f"re-announced {len(d['refreshed'])} listings"))


@market.command("sync")
@common_options
def market_sync(ctx: CliContext) -> None:
    """Listings sync with peers: recent sessions (pages, accepted, ignored, rejected)."""
    ctx.emit(ctx.api().market_sync(), lambda d: table(
        f"served {d.get('served_pages', 0)} pages",
        ["peer", "pages", "accepted", "ignored", "rejected", "stopped"],
        [[s["peer_id"][-12:], s["pages"], s["accepted"], s["ignored"], s["rejected"],
          s["stopped"][:40]] for s in d.get("sessions", [])]))


@market.command("claim")
@common_options
def market_claim(ctx: CliContext) -> None:
    """Claim now every voucher buyers paid this node with (the node also claims on a timer)."""
    ctx.emit(ctx.api().claim(), lambda d: click.echo(
        f"claimed {usdc(d['claimed_micro_usdc'])} from {d['claimed_channels']} channels in "
        f"{len(d['transactions'])} transactions"))


@market.command("stats")
@common_options
def stats(ctx: CliContext) -> None:
    """Earnings and spending, top-earning skills, 7-day trend."""

    def render(d: dict[str, Any]) -> None:
        click.echo(f"earned {usdc(d['earned_micro_usdc'])}   spent {usdc(d['spent_micro_usdc'])}"
                   f"   net {usdc(d['net_micro_usdc'])}")
        if d["top_skills"]:
            table("top skills", ["skill", "sales", "unique buyers", "earned"],
                  [[t["name"] or t["stable_skill_id"][:12], t["sales"], t["unique_buyers"],
                    usdc(t["earned"])] for t in d["top_skills"]])
        table("last 7 days", ["day", "earned", "spent"],
              [[t["day"], usdc(t["earned_micro_usdc"]), usdc(t["spent_micro_usdc"])]
               for t in d["trend_7d"]])

    ctx.emit(ctx.api().market_stats(), render)
