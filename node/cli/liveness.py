"""The living market from the command line: ``skill unpublish|reprice``."""

from __future__ import annotations

import click

from node.cli.context import CliContext, common_options, parse_usdc, usdc
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
