"""Issue 36 delivery 2: purchases with x402 batch-settlement vouchers between two real nodes
(libp2p hosts, SQLite, the eth-tester chain with the channel contract at the SDK's address).

The first purchase from a seller opens a channel (its deposit rides with the voucher and the
seller submits it); later ones are one voucher, checked without the chain, recorded on both
sides, delivered at once; the seller claims them in one transaction and the money arrives.
A seller that takes only ``exact`` is still bought from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from eth_account import Account

from node.chain import Channels
from node.chain.embedded import EmbeddedChain
from node.market.purchase import PurchaseRefused
from node.market.purchase.channels.terms import sign_voucher
from tests.support.market import BUYER_USDC, Market, start_market

SKILLS = (
    "Roll back a bad Helm release: helm history, helm rollback to the last good revision",
    "Rotate a leaked AWS access key: create a new key, deploy it, deactivate the old one",
    "Drain a Kubernetes node safely: cordon, drain with a PodDisruptionBudget, uncordon",
)


@pytest.fixture
async def market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> Market:
    return await start_market(tmp_path, chain, nursery, vouchers=True)


async def on_chain(market: Market, channel_id: str) -> tuple[int, int]:
    """(balance, total claimed) of a channel, as the contract holds it."""
    channels = Channels(market.chain.client(), market.chain.deployer)
    state = await trio.to_thread.run_sync(channels.state, channel_id)
    return state.balance_micro, state.total_claimed_micro


async def test_voucher_purchases_deliver_at_once_and_are_claimed_in_one_transaction(
        market: Market) -> None:
    listings = [await market.publish(text) for text in SKILLS]
    await market.known_to_buyer(*listings)
    deposit = market.buyer.config.market.channel_deposit_micro_usdc
    prices = [listing["price_micro_usdc"] for listing in listings]

    first = await market.buyer.market.buy(listings[0]["listing_id"])
    assert first["scheme"] == "batch-settlement" and first["crystal_id"]
    assert first["deposit_micro_usdc"] == deposit and first["deposit_tx"]
    channel_id = first["channel_id"]
    assert await on_chain(market, channel_id) == (deposit, 0)
    # The deposit left the buyer's wallet; nothing reached the seller yet.
    assert await market.balances() == (0, BUYER_USDC - deposit)

    block = await market.block()
    second = await market.buyer.market.buy(listings[1]["listing_id"])
    third = await market.buyer.market.buy(listings[2]["listing_id"])
    # No chain transaction for a voucher purchase.
    assert await market.block() == block
    assert (second["deposit_micro_usdc"], third["deposit_micro_usdc"]) == (0, 0)
    assert third["channel_total_micro_usdc"] == sum(prices)

    [bought] = (await market.buyer.market.channels())["paying"]
    assert (bought["spent_micro_usdc"], bought["deposit_micro_usdc"]) == (sum(prices), deposit)
    seller_view = await market.seller.market.channels()
    [sold] = seller_view["paid_by"]
    assert (sold["charged_micro_usdc"], sold["unclaimed_micro_usdc"]) == (sum(prices), sum(prices))
    assert seller_view["unclaimed_micro_usdc"] == sum(prices)
    sales = await market.seller.market.sales(10)
    assert sorted((sale["scheme"], sale["state"], sale["voucher_total"]) for sale in sales) == [
        ("batch-settlement", "delivered", prices[0]),
        ("batch-settlement", "delivered", prices[0] + prices[1]),
        ("batch-settlement", "delivered", sum(prices))]

    claimed = await market.seller.market.claim()
    assert claimed["claimed_micro_usdc"] == sum(prices) and len(claimed["transactions"]) == 1
    assert await on_chain(market, channel_id) == (deposit, sum(prices))
    assert await market.balances() == (sum(prices), BUYER_USDC - deposit)
    seller_view = await market.seller.market.channels()
    assert seller_view["paid_by"][0]["unclaimed_micro_usdc"] == 0
    assert seller_view["claims"]["claims"] == 1 and seller_view["claims"]["gas_used"] > 0


async def test_a_refund_claims_what_is_owed_and_returns_the_rest(market: Market) -> None:
    listing = await market.publish(SKILLS[0])
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    bought = await market.buyer.market.buy(listing["listing_id"])

    refunded = await market.buyer.market.refund(bought["channel_id"])
    deposit = market.buyer.config.market.channel_deposit_micro_usdc
    assert (refunded["spent_micro_usdc"], refunded["refunded_micro_usdc"]) == (price, deposit - price)
    assert await market.balances() == (price, BUYER_USDC - price)
    assert await on_chain(market, bought["channel_id"]) == (price, price)
    [closed] = (await market.buyer.market.channels())["paying"]
    assert (closed["state"], closed["refund_tx"]) == ("closed", refunded["tx_hash"])
    [sold] = (await market.seller.market.channels())["paid_by"]
    assert (sold["state"], sold["unclaimed_micro_usdc"]) == ("closed", 0)

    # A closed channel is not paid through again: the next purchase opens a fresh deposit.
    again = await market.buyer.market.buy(listing["listing_id"], again=True)
    assert again["scheme"] == "batch-settlement" and again["deposit_micro_usdc"] == deposit


async def test_a_deposit_made_ahead_is_spent_by_the_first_voucher(market: Market) -> None:
    listing = await market.publish(SKILLS[1])
    await market.known_to_buyer(listing)
    seller_key = market.seller.identity.public_key.hex()
    made = await market.buyer.market.deposit(seller_key, 300_000)
    assert made["deposit_micro_usdc"] == 300_000 and made["tx_hash"]

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["channel_id"] == made["channel_id"] and bought["deposit_micro_usdc"] == 0
    assert await on_chain(market, made["channel_id"]) == (300_000, 0)


async def test_a_seller_without_channels_is_paid_with_exact(market: Market) -> None:
    market.seller.channel_chain = None  # a seller whose chain has no channel contract
    listing = await market.publish(SKILLS[2])
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["scheme"] == "exact" and bought["tx_hash"]
    assert await market.balances() == (price, BUYER_USDC - price)
    assert (await market.buyer.market.channels())["paying"][0]["deposit_micro_usdc"] == 0


async def test_the_api_and_metrics_show_channels_exposure_and_claims(market: Market) -> None:
    listing = await market.publish(SKILLS[0])
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    async with market.http(market.buyer) as buyer_api, market.http(market.seller) as seller_api:
        bought = (await buyer_api.post("/v1/purchases", json={"listing_id": listing["listing_id"]})).json()
        assert bought["scheme"] == "batch-settlement"
        paying = (await buyer_api.get("/v1/wallet/channels")).json()["paying"]
        assert [channel["spent_micro_usdc"] for channel in paying] == [price]

        metrics = (await seller_api.get("/metrics")).text
        assert f"crystalmesh_unclaimed_exposure_micro_usdc {float(price)}" in metrics
        claimed = (await seller_api.post("/v1/market/claim")).json()
        assert claimed["claimed_micro_usdc"] == price
        assert "x402" in claimed  # the x402 endpoint's channels were claimed in the same call
        metrics = (await seller_api.get("/metrics")).text
        assert "crystalmesh_unclaimed_exposure_micro_usdc 0.0" in metrics
        assert 'crystalmesh_channel_claims_total{outcome="mined"}' in metrics

        refused = await buyer_api.post("/v1/wallet/refund", json={"channel_id": "0x1234"})
        assert refused.status_code == 400
        unknown = await buyer_api.post("/v1/wallet/refund", json={"channel_id": "0x" + "ab" * 32})
        assert unknown.status_code == 409


async def test_a_buyer_behind_the_sellers_record_resyncs_on_its_own_voucher_only(
        market: Market) -> None:
    listings = [await market.publish(text) for text in SKILLS]
    await market.known_to_buyer(*listings)
    prices = [listing["price_micro_usdc"] for listing in listings]
    first = await market.buyer.market.buy(listings[0]["listing_id"])
    channel_id = first["channel_id"]
    buyer_db = market.buyer.memory.run

    def forget() -> None:  # the buyer's record rolled back (say, a restored backup)
        with market.buyer.channel_ledger.db.transaction() as conn:
            conn.execute("UPDATE buyer_channels SET charged_total=0 WHERE channel_id=?", (channel_id,))

    await buyer_db(forget)
    second = await market.buyer.market.buy(listings[1]["listing_id"])
    # The seller answered with its record (the buyer's own voucher for prices[0]): re-signed on it.
    assert second["channel_total_micro_usdc"] == prices[0] + prices[1]

    # A seller whose record is not backed by the buyer's signature is not believed.
    await buyer_db(forget)
    stranger = Account.create()

    def forge() -> None:
        signature = sign_voucher(stranger, market.buyer.channel_ledger.buyer_channel_by_id(channel_id).terms,
                                 prices[0] + prices[1], market.buyer.config.chain.chain_id)
        with market.seller.channel_ledger.db.transaction() as conn:
            conn.execute("UPDATE seller_channels SET voucher_signature=? WHERE channel_id=?",
                         ("0x" + signature.hex(), channel_id))

    await market.seller.memory.run(forge)
    with pytest.raises(PurchaseRefused):
        await market.buyer.market.buy(listings[2]["listing_id"])
    sold = [sale["voucher_total"] for sale in await market.seller.market.sales(10)]
    assert sorted(sold) == [prices[0], prices[0] + prices[1]]


async def test_wallet_channels_shows_the_x402_endpoints_channels_from_the_sdks_store(
        market: Market) -> None:
    from x402.mechanisms.evm.batch_settlement.server import FileChannelStorage
    from x402.mechanisms.evm.batch_settlement.server.storage import Channel

    from node.chain.channels import channel_config

    payer = Account.create().address
    seller = market.seller.wallet_address
    config = channel_config(payer=payer, receiver=seller, receiver_authorizer=seller,
                            token_address=market.chain.token_address)
    channel_id = "0x" + "5a" * 32
    # What the SDK's server scheme writes for a channel paid over HTTP.
    FileChannelStorage(str(market.seller.config.data_dir / "x402-channels")).update_channel(
        channel_id, lambda _: Channel(channel_id=channel_id, channel_config=config,
                                      charged_cumulative_amount="27000", balance="500000",
                                      total_claimed="13500"))
    async with market.http(market.seller) as seller_api:
        shown = (await seller_api.get("/v1/wallet/channels")).json()
    [http] = shown["http_paid_by"]
    assert (http["channel_id"], http["payer"], http["charged_micro_usdc"], http["claimed_micro_usdc"],
            http["unclaimed_micro_usdc"]) == (channel_id, payer, 27_000, 13_500, 13_500)
    assert shown["paid_by"] == [] and shown["http_unreadable"] == 0
