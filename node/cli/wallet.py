"""``crystalmesh wallet ...``: this node's USDC wallet, read from the data dir (no node needed)."""

from __future__ import annotations

import click

from node.cli.context import CliContext, CliError, common_options, usdc
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
