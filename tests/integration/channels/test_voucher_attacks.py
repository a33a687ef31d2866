"""Issue 36 delivery 4: vouchers a seller must refuse, sent over real libp2p hosts.

The buyer's node opens a real channel with one honest purchase; then a peer (the buyer's
own host, sending crafted envelopes) presents forged, wrong-channel, replayed,
non-increasing, over-deposit and withdrawing-channel vouchers, and a voucher for one
seller's channel to another seller. Each is refused with its reason and leaves nothing
behind: no sale, no change of the seller's channel record, no delivery. A voucher the
seller could not record is never delivered on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import trio
from eth_account import Account

from node.chain import Channels
from node.chain.embedded import EmbeddedChain
from node.crystals import now_ms
from node.market.purchase import PurchaseRefused
from node.market.purchase.channels.terms import sdk_config, sign_voucher
from node.service import NodeService
from protocol.channel import ChannelState, ChannelTerms, VoucherDelivery, VoucherPurchaseRequest
from protocol.envelope import open_envelope, seal
from protocol.messages import ErrorReply, Message
from protocol.purchase import new_request_id
from tests.support.market import WAIT_S, Market, start_market

SKILL = "Roll back a bad Helm release: helm history, helm rollback to the last good revision"
OTHER = "Rotate a leaked AWS access key: create a new key, deploy it, deactivate the old one"


@pytest.fixture
async def market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> Market:
    return await start_market(tmp_path, chain, nursery, vouchers=True)


@dataclasses.dataclass
class Opened:
    listing: dict[str, Any]
    terms: ChannelTerms
    channel_id: bytes
    total: int


async def open_channel(market: Market, listing: dict[str, Any] | None = None) -> Opened:
    """One honest voucher purchase: the channel exists, funded, charged one price."""
    if listing is None:
        listing = await market.publish(SKILL)
        await market.known_to_buyer(listing)
    bought = await market.buyer.market.buy(listing["listing_id"], again=True)
    [channel] = (await market.buyer.market.channels())["paying"]
    stored = await market.buyer.memory.run(market.buyer.channel_ledger.buyer_channel_by_id,
                                           bought["channel_id"])
    assert stored is not None and channel["spent_micro_usdc"] == listing["price_micro_usdc"]
    return Opened(listing, stored.terms, bytes.fromhex(bought["channel_id"][2:]),
                  bought["channel_total_micro_usdc"])


def voucher(market: Market, opened: Opened, total: int, *, signer: Any = None,
            terms: ChannelTerms | None = None, channel_id: bytes | None = None,
            request_id: str | None = None, listing_id: str | None = None,
            price: int | None = None) -> VoucherPurchaseRequest:
    terms = terms or opened.terms
    return VoucherPurchaseRequest(
        request_id=request_id or new_request_id(),
        listing_id=listing_id or opened.listing["listing_id"],
        price_micro_usdc=opened.listing["price_micro_usdc"] if price is None else price,
        channel=terms, channel_id=channel_id or opened.channel_id, max_claimable=total,
        signature=sign_voucher(signer or market.buyer.wallet, terms, total,
                               market.buyer.config.chain.chain_id),
        deposit=None)


async def seller_record(market: Market) -> tuple[list[Any], list[Any]]:
    """(voucher sales, seller channel rows): what a refusal must leave unchanged."""
    sales = [(sale["request_id"], sale["voucher_total"]) for sale in
             await market.seller.market.sales(100)]
    channels = [(row["channel_id"], row["charged_micro_usdc"]) for row in
                (await market.seller.market.channels())["paid_by"]]
    return sales, channels


async def ask(market: Market, message: Message) -> Message:
    return (await market.ask_seller(message)).message()


async def test_forged_wrong_channel_non_increasing_and_over_deposit_vouchers_are_refused(
        market: Market) -> None:
    opened = await open_channel(market)
    price = opened.listing["price_micro_usdc"]
    again = await market.buyer.market.buy(opened.listing["listing_id"], again=True)
    opened.total = again["channel_total_micro_usdc"]
    assert opened.total == 2 * price
    before = await seller_record(market)
    stranger = Account.create()

    forged = await ask(market, voucher(market, opened, opened.total + price, signer=stranger))
    assert isinstance(forged, ErrorReply) and forged.code == "payment_invalid"
    assert forged.message.startswith("voucher_forged")

    # Terms naming another receiver (a channel to someone else): its id is not ours.
    elsewhere = dataclasses.replace(opened.terms, receiver=stranger.address,
                                    receiver_authorizer=stranger.address)
    wrong = await ask(market, voucher(market, opened, opened.total + price, terms=elsewhere))
    assert isinstance(wrong, ErrorReply) and wrong.message.startswith("voucher_wrong_channel")
    # Our terms under another channel id.
    mismatched = await ask(market, voucher(market, opened, opened.total + price,
                                           channel_id=b"\x42" * 32))
    assert isinstance(mismatched, ErrorReply)
    assert mismatched.message.startswith("voucher_wrong_channel")

    # The recorded total again (a replay of the last voucher under a new request), and less.
    for total in (opened.total, opened.total - 1, price):
        stale = await ask(market, voucher(market, opened, total))
        assert isinstance(stale, ChannelState) and stale.reason == "base"
        assert stale.message.startswith("voucher_non_increasing")
        assert stale.charged_total == opened.total
    # Skipping ahead (more than one price) is not this purchase either.
    ahead = await ask(market, voucher(market, opened, opened.total + 2 * price))
    assert isinstance(ahead, ChannelState) and ahead.message.startswith("voucher_base_mismatch")

    assert await seller_record(market) == before


async def test_an_over_deposit_voucher_gets_the_channel_state_and_nothing_else(
        market: Market) -> None:
    # A tiny first deposit is refused (the seller pays its gas) ...
    market.buyer.config.market.channel_deposit_micro_usdc = 1
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    with pytest.raises(PurchaseRefused) as refused:
        await market.buyer.market.buy(listing["listing_id"])
    assert "deposit_below_minimum" in str(refused.value)
    assert await market.seller.market.sales(10) == []
    # ... unless the seller takes it: a deposit of exactly one price.
    market.seller.seller.channel_min_deposit_micro_usdc = 0
    opened = await open_channel(market, listing)
    price = opened.listing["price_micro_usdc"]
    before = await seller_record(market)

    over = await ask(market, voucher(market, opened, opened.total + price))
    assert isinstance(over, ChannelState) and over.reason == "deposit"
    assert over.message.startswith("voucher_over_deposit") and over.balance == price
    assert await seller_record(market) == before


async def test_a_replayed_request_is_delivered_again_never_charged_twice(market: Market) -> None:
    opened = await open_channel(market)
    price = opened.listing["price_micro_usdc"]
    request = voucher(market, opened, opened.total + price)
    first = await ask(market, request)
    assert isinstance(first, VoucherDelivery) and first.charged_total == opened.total + price
    after_first = await seller_record(market)

    again = await ask(market, request)  # the same envelope body: the buyer lost the answer
    assert isinstance(again, VoucherDelivery) and again.charged_total == first.charged_total
    assert await seller_record(market) == after_first

    # The same voucher under another request id is a second purchase on an old total.
    replayed = await ask(market, dataclasses.replace(request, request_id=new_request_id()))
    assert isinstance(replayed, ChannelState)
    assert replayed.message.startswith("voucher_non_increasing")
    assert await seller_record(market) == after_first


async def test_a_withdrawing_channel_takes_no_more_vouchers(market: Market) -> None:
    opened = await open_channel(market)
    price = opened.listing["price_micro_usdc"]
    buyer_channels = Channels(market.chain.client(), market.buyer.wallet)
    await trio.to_thread.run_sync(buyer_channels.initiate_withdraw, sdk_config(opened.terms), 1)
    market.seller.seller.channel_state_ttl_s = 0  # re-read at once (the timer does it each minute)
    before = await seller_record(market)

    refused = await ask(market, voucher(market, opened, opened.total + price))
    assert isinstance(refused, ErrorReply) and refused.message.startswith("channel_withdrawing")
    assert await seller_record(market) == before
    # The claim timer sees the withdrawal and claims what the vouchers owe at once.
    claimed = await market.seller.claimer.claim(force=False)
    assert claimed["claimed_micro_usdc"] == opened.total


async def test_one_deposit_cannot_pay_a_second_seller(
        tmp_path: Path, market: Market) -> None:
    opened = await open_channel(market)
    other: NodeService = await market.add_buyer(tmp_path, "seller2", vouchers=True)
    crystal = await other.memory.add_from_request({"text": OTHER, "type": "skill",
                                                   "scope": "public", "category": "ops",
                                                   "tags": ["ops"]})
    for _ in range(other.config.market.min_executions):
        await other.market.record_execution(crystal.id, True, 0.9)
    listing = await other.market.publish_skill(crystal.id)
    # The buyer's real voucher on its channel to seller 1, presented to seller 2.
    request = voucher(market, opened, opened.total + listing["price_micro_usdc"],
                      listing_id=listing["listing_id"], price=listing["price_micro_usdc"])
    net = market.buyer.net
    data = seal(market.buyer.identity, request.KIND, request, net.sequence.next(), now_ms())
    reply = open_envelope(await net.request(other.identity.peer_id, data, WAIT_S)).message()
    assert isinstance(reply, ErrorReply) and reply.message.startswith("voucher_wrong_channel")
    assert (await other.market.channels())["paid_by"] == []
    assert await other.market.sales(10) == []


async def test_a_voucher_the_seller_cannot_record_is_never_delivered_on(
        market: Market, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = await open_channel(market)
    price = opened.listing["price_micro_usdc"]
    before = await seller_record(market)
    ledger = market.seller.channel_ledger

    def disk_full(*args: Any) -> bool:
        raise OSError("database or disk is full")

    monkeypatch.setattr(ledger, "record_voucher_sale", disk_full)
    reply = await ask(market, voucher(market, opened, opened.total + price))
    assert isinstance(reply, ErrorReply) and not isinstance(reply, VoucherDelivery)
    assert await seller_record(market) == before
