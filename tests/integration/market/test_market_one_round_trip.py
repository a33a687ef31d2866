"""Issue 26 delivery 2: a purchase in one round trip to the seller (two real nodes over
libp2p and an eth-tester chain, ``tests/support/market.py``).

The buyer signs its EIP-3009 authorization from the signed listing it holds and sends it with
the request; the seller checks it against its listing as it stands, settles and delivers. A
re-priced listing is refused with the seller's current signed listing, and the buyer signs
that once, with the same nonce: at most one of the two authorizations can ever settle. A
seller that speaks only the multi-step exchange is still bought from."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import node.market.purchase.buyer as buyer_module
from node.chain.authorization import Authorization
from node.crystals.model import now_ms
from node.market.purchase.buyer import PurchaseError, PurchaseRefused
from node.memory import SearchRequest
from protocol.envelope import Envelope, open_envelope, seal
from protocol.messages import PaidPurchaseRequest
from protocol.topics import PURCHASE_EXCHANGES
from tests.support.market import BUYER_USDC, WAIT_S, Market
from tests.support.wait import wait_until_async

SKILL = ("Roll back a bad Helm release: helm history, helm rollback to the last good revision, "
         "then check the pods' readiness and the ingress")
STEPS_ONLY = {kind: answers for kind, answers in PURCHASE_EXCHANGES.items()
              if kind != PaidPurchaseRequest.KIND}


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> list[Authorization]:
    """Every EIP-3009 authorization the buyer signs (a spy; signing still runs)."""
    made: list[Authorization] = []
    real = buyer_module.sign_authorization

    def spy(*args: Any, **kwargs: Any) -> Authorization:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(buyer_module, "sign_authorization", spy)
    return made


def requests_seen(market: Market, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of every purchase-protocol request the seller's handler answers."""
    kinds: list[str] = []
    transport = market.seller.net.purchases
    handle = transport._handler
    assert handle is not None

    async def spy(peer_id: str, envelope: Envelope) -> bytes:
        kinds.append(envelope.kind)
        return await handle(peer_id, envelope)

    monkeypatch.setattr(transport, "_handler", spy)
    return kinds


async def receipt_sent(kinds: list[str]) -> None:
    async def sent() -> bool:
        return "receipt" in kinds

    await wait_until_async(sent, WAIT_S, "the buyer's receipt to reach the seller")


async def reprice_unheard(market: Market, monkeypatch: pytest.MonkeyPatch, listing_id: str,
                          price: int) -> None:
    """The seller re-prices, and the buyer has not heard it yet (the announcement is signed
    and stored by the seller, never gossiped)."""
    seller = market.seller

    async def sealed_only(topic: str, message: Any, issued_at_ms: int | None = None) -> Envelope:
        data = seal(seller.identity, message.KIND, message, seller.net.sequence.next(),
                    issued_at_ms or now_ms())
        return open_envelope(data)

    monkeypatch.setattr(seller.publisher, "gossip_publish", sealed_only)
    await seller.market_liveness.reprice(listing_id, price)


async def test_a_purchase_is_one_round_trip_to_the_seller(
        market: Market, monkeypatch: pytest.MonkeyPatch, signed: list[Authorization]) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    kinds = requests_seen(market, monkeypatch)

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["round_trips"] == 1 and bought["crystal_id"]
    # The purchase itself is one request; the receipt follows in the background.
    assert kinds[0] == PaidPurchaseRequest.KIND
    await receipt_sent(kinds)
    assert kinds == [PaidPurchaseRequest.KIND, "receipt"]
    [authorization] = signed
    assert (authorization.value_micro, authorization.to.lower()) == (
        price, market.seller.wallet_address.lower())
    assert await market.balances() == (price, BUYER_USDC - price)
    assert await market.rows(listing["listing_id"]) == (
        [("completed", bought["tx_hash"], price)], [("delivered", bought["tx_hash"], price)])
    # Bought knowledge is marked with its seller and held at the market's confidence (issue 28).
    [hit] = await market.buyer.memory.search(SearchRequest("roll back a bad helm release", k=1))
    assert hit.crystal.id == bought["crystal_id"]
    marks = hit.to_dict()["crystal"]
    assert (marks["provenance"], marks["seller"]) == ("bought", market.seller.identity.public_key.hex())


async def test_a_cheaper_price_is_signed_once_more_with_the_same_nonce_and_paid_once(
        market: Market, monkeypatch: pytest.MonkeyPatch, signed: list[Authorization]) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    old_price = listing["price_micro_usdc"]
    new_price = old_price - 1_000
    await reprice_unheard(market, monkeypatch, listing["listing_id"], new_price)
    kinds = requests_seen(market, monkeypatch)

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["round_trips"] == 2 and bought["price_micro_usdc"] == new_price
    await receipt_sent(kinds)
    assert kinds == [PaidPurchaseRequest.KIND, PaidPurchaseRequest.KIND, "receipt"]
    refused, accepted = signed
    assert (refused.value_micro, accepted.value_micro) == (old_price, new_price)
    # One nonce for both: whichever reaches the chain first, the other never can.
    assert refused.nonce == accepted.nonce
    used = await trio.to_thread.run_sync(
        market.chain.client().authorization_state, refused.from_address, refused.nonce)
    assert used
    assert await market.balances() == (new_price, BUYER_USDC - new_price)
    assert await market.rows(listing["listing_id"]) == (
        [("completed", bought["tx_hash"], new_price)],
        [("delivered", bought["tx_hash"], new_price)])
    # The buyer's book took the seller's signed listing: it shows the new price.
    stored = await market.buyer.memory.run(market.buyer.listings.get, listing["listing_id"])
    assert stored is not None and stored.listing.price_micro_usdc == new_price


async def test_a_dearer_price_beyond_the_buyers_max_is_refused_unpaid_then_bought_within_it(
        market: Market, monkeypatch: pytest.MonkeyPatch, signed: list[Authorization]) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    old_price = listing["price_micro_usdc"]
    new_price = old_price + 5_000
    await reprice_unheard(market, monkeypatch, listing["listing_id"], new_price)
    kinds = requests_seen(market, monkeypatch)
    block = await market.block()

    with pytest.raises(PurchaseRefused) as refused:
        await market.buyer.market.buy(listing["listing_id"])
    assert refused.value.code == "price_changed" and str(new_price) in str(refused.value)
    assert kinds == [PaidPurchaseRequest.KIND]
    assert await market.block() == block and await market.balances() == (0, BUYER_USDC)
    assert await market.rows(listing["listing_id"]) == ([("refused", None, old_price)], [])

    # Within --max-price: the buyer's book already holds the fresh listing, so one round trip.
    bought = await market.buyer.market.buy(listing["listing_id"], max_price_micro_usdc=new_price)
    assert bought["round_trips"] == 1 and bought["price_micro_usdc"] == new_price
    assert await market.balances() == (new_price, BUYER_USDC - new_price)
    purchases, sales = await market.rows(listing["listing_id"])
    assert sorted(purchases) == sorted([("refused", None, old_price),
                                        ("completed", bought["tx_hash"], new_price)])
    assert sales == [("delivered", bought["tx_hash"], new_price)]


async def test_a_seller_of_the_multistep_version_is_still_bought_from(
        market: Market, monkeypatch: pytest.MonkeyPatch, signed: list[Authorization]) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    monkeypatch.setattr(market.seller.net.purchases, "exchanges", STEPS_ONLY)
    kinds = requests_seen(market, monkeypatch)

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["round_trips"] == 3
    await receipt_sent(kinds)
    # The one-round-trip request was refused before any handler read it; the same signed
    # authorization then went through the old exchange.
    assert kinds == ["purchase_request", "payment_authorization", "receipt"]
    assert len(signed) == 1
    assert await market.balances() == (price, BUYER_USDC - price)
    assert await market.rows(listing["listing_id"]) == (
        [("completed", bought["tx_hash"], price)], [("delivered", bought["tx_hash"], price)])


async def test_a_purchase_from_a_seller_that_is_gone_names_the_step_it_failed_in(
        market: Market) -> None:
    """Issue 38: every failure says where it stopped. The seller's node is down: the purchase
    fails unpaid as ``seller_unreachable`` in a dialling step (the dial, a lookup or a circuit:
    whichever was tried last), and the API answer carries that ``phase``."""
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    seller = market.seller.identity.peer_id
    await market.stop("seller")
    await wait_until_async(lambda: seller not in market.buyer.net.connected_peers(), WAIT_S,
                           "the buyer sees the seller gone")
    with pytest.raises(PurchaseError) as failed:
        await market.buyer.market.buy(listing["listing_id"])
    assert failed.value.code == "seller_unreachable"
    assert failed.value.phase in ("dial", "lookup", "circuit")
    assert not failed.value.money_moved
    async with market.http(market.buyer) as client:
        answer = await client.post("/v1/purchases", json={"listing_id": listing["listing_id"]})
    body = answer.json()
    assert answer.status_code == 502 and body["code"] == "seller_unreachable"
    assert body["phase"] in ("dial", "lookup", "circuit")
