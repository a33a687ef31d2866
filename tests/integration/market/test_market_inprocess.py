"""Issue 10 item 6: the market in process. Two real nodes (NodeService: SQLite, libp2p on
127.0.0.1, hypercorn-trio API) and an eth-tester chain in one trio run reach the publisher,
the listing book, the buyer, the seller, both ledgers and the purchase routes. Every money
figure is an exact integer in micro-USDC, read from the chain and from both ledgers.

Crash and request-id reuse paths: ``test_market_inprocess_faults.py``."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import trio

import node.market.purchase.buyer as buyer_module
from node.market.purchase.buyer import PurchaseRefused
from node.market.purchase.seller import Refusal
from protocol.messages import PaidPurchaseRequest
from protocol.topics import PURCHASE_EXCHANGES
from tests.support.market import BUYER_USDC, Market

FIRST = ("Rotate a leaked API key: revoke it, issue a new one, roll it out to every service, "
         "then search the logs for use of the old key")
SECOND = ("Shrink a bloated Docker image: multi-stage build, slim base, drop the build cache "
          "and the package manager's lists")


# What a seller of the multi-step version serves: everything but the one-round-trip request.
STEPS_ONLY = {kind: answers for kind, answers in PURCHASE_EXCHANGES.items()
              if kind != PaidPurchaseRequest.KIND}


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Values of every EIP-3009 authorization the buyer signs (a spy; signing still runs)."""
    values: list[int] = []
    real = buyer_module.sign_authorization

    def spy(*args: Any, **kwargs: Any) -> Any:
        values.append(kwargs["value_micro"])
        return real(*args, **kwargs)

    monkeypatch.setattr(buyer_module, "sign_authorization", spy)
    return values


async def test_published_listing_is_bought_in_process_and_over_http(
        market: Market, signed: list[int]) -> None:
    first = await market.publish(FIRST)
    second = await market.publish(SECOND, category="containers")
    await market.known_to_buyer(first, second)
    p1, p2 = first["price_micro_usdc"], second["price_micro_usdc"]
    assert isinstance(p1, int) and isinstance(p2, int) and p1 > 0 and p2 > 0

    # Through NodeService.buy, the method POST /v1/purchases calls.
    bought = await market.buyer.market.buy(first["listing_id"])
    assert bought["price_micro_usdc"] == p1 and bought["tx_hash"].startswith("0x")
    assert await market.balances() == (p1, BUYER_USDC - p1)
    assert await market.rows(first["listing_id"]) == (
        [("completed", bought["tx_hash"], p1)], [("delivered", bought["tx_hash"], p1)])
    crystal = await market.buyer.memory.get(bought["crystal_id"])
    assert crystal.text == FIRST
    assert crystal.governance.peer_origin == market.seller.identity.public_key.hex()

    # Through the HTTP route.
    async with market.http(market.buyer) as http:
        response = await http.post("/v1/purchases", json={"listing_id": second["listing_id"]})
        assert response.status_code == 200, response.text
        over_http = response.json()
        listed = (await http.get("/v1/purchases")).json()["purchases"]
    assert over_http["price_micro_usdc"] == p2
    assert await market.balances() == (p1 + p2, BUYER_USDC - p1 - p2)
    assert await market.rows(second["listing_id"]) == (
        [("completed", over_http["tx_hash"], p2)], [("delivered", over_http["tx_hash"], p2)])
    assert {p["listing_id"]: p["state"] for p in listed} == {
        first["listing_id"]: "completed", second["listing_id"]: "completed"}

    assert signed == [p1, p2]
    assert (await market.seller.market.stats())["earned_micro_usdc"] == p1 + p2
    assert (await market.buyer.market.stats())["spent_micro_usdc"] == p1 + p2
    engine = market.seller.engine
    assert engine is not None
    assert await trio.to_thread.run_sync(engine.ledger.confirmed_total_micro,
                                         market.seller.wallet_address) == p1 + p2

    # Bought once: a second buy is refused and moves nothing.
    with pytest.raises(PurchaseRefused) as again:
        await market.buyer.market.buy(first["listing_id"])
    assert again.value.code == "already_owned"
    assert await market.balances() == (p1 + p2, BUYER_USDC - p1 - p2)


async def test_spend_caps_refuse_before_anything_is_signed(
        market: Market, signed: list[int]) -> None:
    first = await market.publish(FIRST)
    second = await market.publish(SECOND, category="containers")
    await market.known_to_buyer(first, second)
    p1, p2 = first["price_micro_usdc"], second["price_micro_usdc"]
    caps = market.buyer.config.market
    block = await market.block()

    with pytest.raises(PurchaseRefused) as refused:
        await market.buyer.market.buy(first["listing_id"], max_price_micro_usdc=p1 - 1)
    assert refused.value.code == "price_above_cap" and "--max-price" in str(refused.value)

    caps.max_per_purchase_micro_usdc = p1 - 1
    with pytest.raises(PurchaseRefused) as refused:
        await market.buyer.market.buy(first["listing_id"])
    assert refused.value.code == "price_above_cap" and "per-purchase cap" in str(refused.value)
    assert signed == [] and await market.block() == block
    assert await market.rows(first["listing_id"]) == ([], [])
    assert await market.balances() == (0, BUYER_USDC)

    # Daily cap: room for the first purchase, not for both.
    caps.max_per_purchase_micro_usdc = max(p1, p2)
    caps.max_per_day_micro_usdc = p1 + p2 - 1
    bought = await market.buyer.market.buy(first["listing_id"])
    assert await market.balances() == (p1, BUYER_USDC - p1)
    block = await market.block()
    async with market.http(market.buyer) as http:
        response = await http.post("/v1/purchases", json={"listing_id": second["listing_id"]})
    assert response.status_code == 409, response.text
    assert "daily cap" in response.text and str(p1 + p2) in response.text
    assert signed == [p1] and await market.block() == block
    assert await market.rows(second["listing_id"]) == ([], [])
    assert await market.rows(first["listing_id"]) == (
        [("completed", bought["tx_hash"], p1)], [("delivered", bought["tx_hash"], p1)])
    assert await market.balances() == (p1, BUYER_USDC - p1)


@pytest.mark.parametrize("exchange", ["one-round-trip", "steps"])
async def test_seller_quoting_other_terms_than_its_listing_is_refused_unpaid(
        market: Market, signed: list[int], monkeypatch: pytest.MonkeyPatch, exchange: str) -> None:
    """The seller asks for twice the price its signed listing shows. In one round trip it
    refuses the buyer's authorization with that very listing (nothing to re-sign); a seller
    that speaks only the multi-step exchange quotes the other price. Either way the buyer
    stops: its authorization was signed from the listing, refused, and never settled."""
    listing = await market.publish(FIRST)
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    seller = market.seller.seller
    listed = seller._sellable
    if exchange == "steps":
        monkeypatch.setattr(market.seller.net.purchases, "exchanges", STEPS_ONLY)

    # The seller now quotes (and would settle) twice the price its gossiped listing shows.
    async def raised(listing_id: str) -> Any:
        found = await listed(listing_id)
        if isinstance(found, Refusal):
            return found
        stored, crystal = found
        dearer = dataclasses.replace(stored.listing, price_micro_usdc=2 * price)
        return dataclasses.replace(stored, listing=dearer), crystal

    monkeypatch.setattr(seller, "_sellable", raised)
    block = await market.block()
    with pytest.raises(PurchaseRefused) as refused:
        await market.buyer.market.buy(listing["listing_id"])
    assert refused.value.code == "terms_mismatch"
    assert (f"price {2 * price} != listed {price}" if exchange == "steps"
            else "refused the very terms its signed listing states") in str(refused.value)
    assert signed == [price] and await market.block() == block
    assert await market.rows(listing["listing_id"]) == ([("refused", None, price)], [])
    assert await market.balances() == (0, BUYER_USDC)
