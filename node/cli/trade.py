"""Buying, selling and the wallet: ``skill buy|redeliver``, ``purchases``, ``sales``,
``market stats``."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from node.cli.context import CliContext, common_options, parse_usdc, table, usdc
from node.cli.network import skill


def _when(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M:%S") if ms else "-"


@skill.command("buy")
@click.argument("listing_id")
@click.option("--max-price", default=None, help="Refuse if the price is above this (USDC, e.g. 0.05).")
@click.option("--again", is_flag=True, help="Buy a listing this node already owns once more.")
@common_options
def buy(ctx: CliContext, listing_id: str, max_price: str | None, again: bool) -> None:
    """Buy a listed skill: pay in USDC, verify the delivery, ingest it.

    Running it again after an interrupted purchase never pays twice: it resends the
    authorization already signed, or collects a payment that already settled."""
    client = ctx.api()
    assert client is not None
    data = client.post("/v1/purchases", {
        "listing_id": listing_id,
        "max_price_micro_usdc": parse_usdc(max_price) if max_price else None,
        "again": again,
    })
    ctx.emit(data, lambda d: click.echo(
        f"bought {d['listing_id'][:16]} for {usdc(d['price_micro_usdc'])}\n"
        f"  tx       {d['tx_hash']}\n"
        + (f"  crystal  {d['crystal_id']}" if d.get("crystal_id") else
           f"  not stored in memory ({d.get('not_ingested_because', 'ingestion gate')}); "
           "the skill text is in the purchase (--json)")))


@skill.command("endorse")
@click.argument("listing_id")
@common_options
def endorse(ctx: CliContext, listing_id: str) -> None:
    """Management nodes: vouch for a listing; every node records it as endorsed."""
    client = ctx.api()
    assert client is not None
    data = client.post(f"/v1/listings/{listing_id}/endorse", {})
    ctx.emit(data, lambda d: click.echo(f"endorsed {d['listing_id'][:16]} as {d['endorsed_by'][:16]}…"))


@skill.command("redeliver")
@click.argument("listing_id")
@common_options
def redeliver(ctx: CliContext, listing_id: str) -> None:
    """Ask the seller again for a skill paid for but not received."""
    client = ctx.api()
    assert client is not None
    data = client.post("/v1/purchases/redeliver", {"listing_id": listing_id})
    ctx.emit(data, lambda d: click.echo(f"received {d['listing_id'][:16]} as crystal {d['crystal_id']}"))


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
        [[_when(r["created_at_ms"]), r["listing_id"][:12], r["name"][:30],
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
        [[_when(r["created_at_ms"]), r["listing_id"][:12], r["buyer_key"][:10],
          usdc(r["price_micro_usdc"]), r["state"], (r["tx_hash"] or "-")[:12]] for r in rows])
        if rows else click.echo("no sales"))


COMMANDS: list[click.Command] = [purchases, sales]
