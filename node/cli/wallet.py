"""``crystalmesh wallet ...``: this node's USDC wallet, read from the data dir (no node needed),
and its payment channels (through the running node)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, parse_usdc, table, usdc
from node.config import NodeConfig


@click.group()
def wallet() -> None:
    """This node's USDC wallet (secp256k1 key in wallet.key, 0600)."""


def _wallet(ctx: CliContext) -> tuple[NodeConfig, str]:
    """The data dir's config and wallet address."""
    from node.chain import load_wallet

    config = ctx.config()
    if not config.wallet_path.exists():
        raise CliError(f"{config.data_dir} has no wallet; run `crystalmesh init`")
    return config, load_wallet(config.wallet_path).address


@wallet.command("address")
@common_options
def address(ctx: CliContext) -> None:
    """The wallet address (works without a running node)."""
    _, account = _wallet(ctx)
    ctx.emit({"address": account}, lambda d: click.echo(d["address"]))


@wallet.command("balance")
@common_options
def balance(ctx: CliContext) -> None:
    """USDC and ETH balances on the configured chain."""
    from node.chain import balances

    config, account = _wallet(ctx)
    found = balances(config.chain.rpc_url, config.chain.token_address, account)
    data = {"address": account, "usdc_micro": found["usdc_micro"], "eth_wei": found["eth_wei"],
            "chain_id": config.chain.chain_id, "rpc_url": config.chain.rpc_url}
    ctx.emit(data, lambda d: click.echo(
        f"{d['address']}\n  {usdc(d['usdc_micro'])}\n  {d['eth_wei'] / 1e18:.6f} ETH (gas)"))


def _when(unix_s: int | None) -> str:
    if not unix_s:
        return "-"
    return datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _render_channels(data: dict[str, Any]) -> None:
    paying, paid_by = data.get("paying", []), data.get("paid_by", [])
    table("paying (channels this node buys through)",
          ["channel", "seller", "deposit", "spent", "left", "state", "withdraw from"],
          [[c["channel_id"][:18], c["seller_key"][:10], usdc(c["deposit_micro_usdc"]),
            usdc(c["spent_micro_usdc"]), usdc(c["remaining_micro_usdc"]), c["state"],
            _when(c.get("withdraw_finalize_after_s"))]
           for c in paying])
    table(f"paid by (unclaimed {usdc(data.get('unclaimed_micro_usdc', 0))})",
          ["channel", "buyer", "deposit", "charged", "unclaimed", "withdraw", "state"],
          [[c["channel_id"][:18], c["buyer_key"][:10], usdc(c["deposit_micro_usdc"]),
            usdc(c["charged_micro_usdc"]), usdc(c["unclaimed_micro_usdc"]),
            "requested" if c["withdraw_requested_at_s"] else "-", c["state"]] for c in paid_by])
    http = data.get("http_paid_by", [])
    if http or data.get("http_unreadable"):
        unreadable = data.get("http_unreadable", 0)
        table("paid over HTTP (the x402 endpoint)" + (f", {unreadable} unreadable records"
                                                       if unreadable else ""),
              ["channel", "payer", "deposit", "charged", "claimed", "unclaimed", "withdraw"],
              [[c["channel_id"][:18], c["payer"][:12], usdc(c["deposit_micro_usdc"]),
                usdc(c["charged_micro_usdc"]), usdc(c["claimed_micro_usdc"]),
                usdc(c["unclaimed_micro_usdc"]),
                "requested" if c["withdraw_requested_at_s"] else "-"] for c in http])


@wallet.command("channels")
@common_options
def channels(ctx: CliContext) -> None:
    """Payment channels (x402 batch-settlement): deposit, spent, unclaimed, withdraw state.

    \f
    Example: ``crystalmesh wallet channels``
    """
    ctx.emit(ctx.api().channels(), _render_channels)


@wallet.command("deposit")
@click.argument("seller_key")
@click.argument("amount")
@common_options
def deposit(ctx: CliContext, seller_key: str, amount: str) -> None:
    """Deposit AMOUNT USDC into the channel to SELLER_KEY (opens it if needed; refundable).

    \f
    Example: ``crystalmesh wallet deposit 3b6a…e1 0.5``
    """
    micro = parse_usdc(amount)
    click.echo(f"depositing {usdc(micro)} into a channel to {seller_key[:16]} "
               "(refundable with `crystalmesh wallet refund`)", err=True)
    ctx.emit(ctx.api().deposit(seller_key, micro), lambda d: click.echo(
        f"channel {d['channel_id']} now holds {usdc(d['deposit_micro_usdc'])} (tx {d['tx_hash']})"))


@wallet.command("withdraw")
@click.argument("channel_id")
@common_options
def withdraw(ctx: CliContext, channel_id: str) -> None:
    """Take CHANNEL_ID's unclaimed deposit back without the seller: the first call starts the
    contract's timed withdrawal, a call after the channel's delay completes it (gas: this node).

    \f
    Example: ``crystalmesh wallet withdraw 0x5f…c2``
    """
    def render(d: dict[str, Any]) -> None:
        if d["step"] == "initiated":
            click.echo(f"withdrawal of {usdc(d['withdraw_micro_usdc'])} started (tx {d['tx_hash']}); "
                       f"run this again after {_when(d['withdraw_finalize_after_s'])}")
        else:
            click.echo(f"withdrew {usdc(d['withdrawn_micro_usdc'])} (spent "
                       f"{usdc(d['spent_micro_usdc'])}) in {d['tx_hash']}")

    ctx.emit(ctx.api().withdraw(channel_id), render)


@wallet.command("refund")
@click.argument("channel_id")
@common_options
def refund(ctx: CliContext, channel_id: str) -> None:
    """Close CHANNEL_ID: the seller claims what was spent and returns the rest, in one transaction."""
    ctx.emit(ctx.api().refund(channel_id), lambda d: click.echo(
        f"refunded {usdc(d['refunded_micro_usdc'])} (spent {usdc(d['spent_micro_usdc'])}) "
        f"in {d['tx_hash']}"))
