"""What this node bought and sold: ``purchases``, ``sales``."""

from __future__ import annotations

import click

from node.cli.context import CliContext, common_options, table, usdc, when


@click.command()
@click.option("--limit", type=int, default=50, show_default=True)
@common_options
def purchases(ctx: CliContext, limit: int) -> None:
    """Skills this node bought (or tried to)."""
    client = ctx.api()
    assert client is not None
    items = client.get("/v1/purchases", limit=limit)["purchases"]
    ctx.emit(items, lambda rows: table(
        None, ["when", "listing", "name", "price", "state", "tx", "crystal"],
        [[when(r["created_at_ms"], "%m-%d %H:%M:%S"), r["listing_id"][:12], r["name"][:30],
          usdc(r["price_micro_usdc"]), r["state"], (r["tx_hash"] or "-")[:12],
          (r["crystal_id"] or "-")[:8]] for r in rows]) if rows else click.echo("no purchases"))


@click.command()
@click.option("--limit", type=int, default=50, show_default=True)
@common_options
def sales(ctx: CliContext, limit: int) -> None:
    """Skills this node sold."""
    client = ctx.api()
    assert client is not None
    items = client.get("/v1/sales", limit=limit)["sales"]
    ctx.emit(items, lambda rows: table(
        None, ["when", "listing", "buyer", "price", "state", "tx"],
        [[when(r["created_at_ms"], "%m-%d %H:%M:%S"), r["listing_id"][:12], r["buyer_key"][:10],
          usdc(r["price_micro_usdc"]), r["state"], (r["tx_hash"] or "-")[:12]] for r in rows])
        if rows else click.echo("no sales"))


COMMANDS: list[click.Command] = [purchases, sales]
