"""Issue 36 delivery 4 on a real devnet (anvil with the channel contract + node processes):
kill -9 (``os._exit``, ``tests/support/fault_node.py``) at each step of a voucher purchase, a
claim and a refund; after the restart and the same command again there is one outcome that
buyer, seller and chain agree on: each purchase charged once, each delivered, the claimed
money in the seller's wallet, the rest of the deposit back with the buyer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from node.api.client import pid_alive
from node.chain import ChainClient, Channels, load_wallet
from node.config import load_config
from tests.support.devnet import Devnet, known_everywhere, publish, usdc
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELLER, BUYER = "node-1", "node-2"
VOUCHERS = {"CRYSTALMESH_MARKET_VOUCHERS": "true"}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    before = os.environ.get("CRYSTALMESH_MARKET_VOUCHERS")
    os.environ.update(VOUCHERS)  # the node processes `devnet up` starts take vouchers
    try:
        with Devnet(tmp_path_factory.mktemp("voucher-crashes") / "devnet", 2) as net:
            yield net
    finally:
        if before is None:
            os.environ.pop("CRYSTALMESH_MARKET_VOUCHERS", None)
        else:
            os.environ["CRYSTALMESH_MARKET_VOUCHERS"] = before


def restart_with(devnet: Devnet, name: str, fault: str) -> None:
    devnet.stop_node(name)
    devnet.restart_node(name, env=VOUCHERS, fault=fault)


def back(devnet: Devnet, name: str) -> None:
    wait_until(lambda: not pid_alive(devnet.state.node(name).pid), 30,  # type: ignore[union-attr]
               f"faulted {name} gone")
    devnet.restart_node(name, env=VOUCHERS)


def channel_on_chain(devnet: Devnet, channel_id: str) -> tuple[int, int]:
    config = load_config(devnet.data_dir(BUYER))
    client = ChainClient.connect(config.chain.rpc_url, config.chain.token_address)
    state = Channels(client, load_wallet(config.wallet_path)).state(channel_id)
    return state.balance_micro, state.total_claimed_micro


def rows(devnet: Devnet, listing_id: str) -> tuple[list[Any], list[Any]]:
    purchases = [(p["state"], p["scheme"], p["voucher_total"]) for p in
                 devnet.api(BUYER).get("/v1/purchases")["purchases"] if p["listing_id"] == listing_id]
    sales = [(s["state"], s["scheme"], s["voucher_total"]) for s in
             devnet.api(SELLER).get("/v1/sales")["sales"] if s["listing_id"] == listing_id]
    return purchases, sales


def paying(devnet: Devnet) -> dict[str, Any]:
    [channel] = [c for c in devnet.api(BUYER).channels()["paying"] if c["state"] != "closed"]
    return dict(channel)


@pytest.fixture(scope="module")
def scene() -> dict[str, Any]:
    """What the steps below hand on (they run in order, on one devnet)."""
    return {}


def test_kill_at_each_step_of_a_voucher_purchase_leaves_one_outcome(
        devnet: Devnet, scene: dict[str, Any]) -> None:
    listings = [publish(devnet, SELLER, text) for text in (
        "Rebuild a broken Kubernetes node: cordon, drain, reimage, rejoin the cluster",
        "Rotate a leaked AWS access key: create a new key, deploy it, deactivate the old one",
        "Recover a wedged Postgres replica: fresh pg_basebackup, recovery signal, hot standby")]
    for listing in listings:
        known_everywhere(devnet, listing["listing_id"], (BUYER,))
    prices = [listing["price_micro_usdc"] for listing in listings]
    before = {name: usdc(devnet, name) for name in (SELLER, BUYER)}
    deposit = load_config(devnet.data_dir(BUYER)).market.channel_deposit_micro_usdc

    # 1. The seller dies as the voucher (and the deposit riding with it) arrives.
    restart_with(devnet, SELLER, "crash_on_voucher_received")
    failed = devnet.cli("skill", "buy", listings[0]["listing_id"], node=BUYER, check=False)
    assert failed.returncode == 1 and "resends it" in failed.stderr
    assert usdc(devnet, BUYER) == before[BUYER]  # nothing deposited, nothing charged
    back(devnet, SELLER)
    first = devnet.cli_json("skill", "buy", listings[0]["listing_id"], node=BUYER)
    assert first["scheme"] == "batch-settlement" and first["crystal_id"]
    assert usdc(devnet, BUYER) == before[BUYER] - deposit
    assert rows(devnet, listings[0]["listing_id"]) == (
        [("completed", "batch-settlement", prices[0])], [("delivered", "batch-settlement", prices[0])])

    # 2. The seller dies after recording the voucher, before delivering: delivered on the retry.
    restart_with(devnet, SELLER, "crash_after_voucher_recorded")
    failed = devnet.cli("skill", "buy", listings[1]["listing_id"], node=BUYER, check=False)
    assert failed.returncode == 1
    back(devnet, SELLER)
    assert rows(devnet, listings[1]["listing_id"])[1] == [
        ("vouched", "batch-settlement", prices[0] + prices[1])]
    second = devnet.cli_json("skill", "buy", listings[1]["listing_id"], node=BUYER)
    assert second["crystal_id"] and second["channel_total_micro_usdc"] == prices[0] + prices[1]
    assert rows(devnet, listings[1]["listing_id"])[1] == [
        ("delivered", "batch-settlement", prices[0] + prices[1])]

    # 3. The buyer dies once the seller answered (recorded, delivered into the void).
    restart_with(devnet, BUYER, "crash_buyer_after_voucher_sent")
    devnet.cli("skill", "buy", listings[2]["listing_id"], node=BUYER, check=False)
    back(devnet, BUYER)
    third = devnet.cli_json("skill", "buy", listings[2]["listing_id"], node=BUYER)
    assert third["crystal_id"] and third["channel_total_micro_usdc"] == sum(prices)
    assert rows(devnet, listings[2]["listing_id"]) == (
        [("completed", "batch-settlement", sum(prices))],
        [("delivered", "batch-settlement", sum(prices))])
    channel = paying(devnet)
    assert (channel["spent_micro_usdc"], channel["deposit_micro_usdc"]) == (sum(prices), deposit)
    scene.update(channel=channel, spent=sum(prices), deposit=deposit, before=before)


def test_kill_at_each_step_of_a_claim_leaves_the_chain_and_the_record_agreed(
        devnet: Devnet, scene: dict[str, Any]) -> None:
    channel, spent, deposit, before = (scene["channel"], scene["spent"], scene["deposit"],
                                       scene["before"])
    # 4. The seller dies after journaling a claim, before sending it: nothing claimed.
    restart_with(devnet, SELLER, "crash_before_claim_sent")
    assert devnet.cli("market", "claim", node=SELLER, check=False).returncode != 0
    back(devnet, SELLER)
    assert channel_on_chain(devnet, channel["channel_id"]) == (deposit, 0)

    # 5. The seller dies after its claim is mined, before recording it: the restart reads it.
    restart_with(devnet, SELLER, "crash_after_claim_mined")
    assert devnet.cli("market", "claim", node=SELLER, check=False).returncode != 0
    back(devnet, SELLER)
    assert channel_on_chain(devnet, channel["channel_id"]) == (deposit, spent)
    wait_until(lambda: devnet.api(SELLER).channels()["unclaimed_micro_usdc"] == 0, 60,
               "the seller's record to follow the chain's claim")
    assert usdc(devnet, SELLER) == before[SELLER] + spent


def test_kill_after_a_refund_is_mined_leaves_the_deposit_returned_once(
        devnet: Devnet, scene: dict[str, Any]) -> None:
    channel, spent, deposit, before = (scene["channel"], scene["spent"], scene["deposit"],
                                       scene["before"])
    # 6. The seller dies after the refund is mined, before answering: the buyer's retry reads it.
    restart_with(devnet, SELLER, "crash_after_refund_mined")
    failed = devnet.cli("wallet", "refund", channel["channel_id"], node=BUYER, check=False)
    assert failed.returncode != 0
    back(devnet, SELLER)
    refunded = devnet.cli_json("wallet", "refund", channel["channel_id"], node=BUYER)
    assert refunded["refunded_micro_usdc"] == deposit - spent
    assert usdc(devnet, BUYER) == before[BUYER] - spent
    assert usdc(devnet, SELLER) == before[SELLER] + spent
    assert channel_on_chain(devnet, channel["channel_id"]) == (spent, spent)
