"""Issue 10 item 6 (fault paths) and issue 11 row 2, in process: two real nodes and an
eth-tester chain in one trio run (see ``tests/support/market.py``).

The seller's crash is injected the way ``tests/support/fault_node.py`` does it, by patching in
the test, never by a hook in ``node/``: its sale ledger dies on the write that would record
the settlement, after the chain settled and before anything was delivered."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from node.chain.authorization import sign_authorization
from node.market.purchase.buyer import PurchaseError, PurchaseRefused
from node.market.purchase.wire import authorization_from_json, payment_message
from protocol.messages import Delivery, ErrorReply
from tests.support.market import BUYER_USDC, Market

SKILL = ("Recover a full disk on a database host: find the largest files, rotate logs, vacuum, "
         "and add an alert before it happens again")
OTHER = ("Debug a DNS outage inside Kubernetes: check CoreDNS pods, resolv.conf, ndots and "
         "upstream resolvers")


class SellerCrashed(Exception):
    """Stands for the seller process dying (kill -9) at the injected point."""


@pytest.mark.parametrize("restart", [False, True], ids=["handler-died", "node-restarted"])
async def test_crash_between_settlement_and_sale_ledger_redelivers_once_paid_once(
        market: Market, monkeypatch: pytest.MonkeyPatch, restart: bool) -> None:
    """The seller dies after the chain settled, before its sale row says so. Either only the
    request handler died (the node lives on), or the node is restarted on its data dir; the
    buyer's redeliver then gets the skill once, with no second payment."""
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    ledger = market.seller.ledger
    record = ledger.update_sale
    settled_on_chain: list[str | None] = []

    def crash_once(request_id: str, state: str, tx_hash: str | None = None,
                   reason: str | None = None) -> None:
        if state == "settled" and not settled_on_chain:
            settled_on_chain.append(tx_hash)
            raise SellerCrashed("the seller died after settling, before its sale ledger knew")
        record(request_id, state, tx_hash, reason)

    monkeypatch.setattr(ledger, "update_sale", crash_once)

    with pytest.raises(PurchaseError) as failed:
        await market.buyer.market.buy(listing["listing_id"])
    assert failed.value.money_moved and "redeliver" in str(failed.value)
    [tx_hash] = settled_on_chain
    assert tx_hash is not None
    # Money moved once; the buyer knows it paid, the seller's sale row never heard.
    assert await market.balances() == (price, BUYER_USDC - price)
    assert await market.rows(listing["listing_id"]) == (
        [("paid_undelivered", tx_hash, price)], [("authorized", None, price)])

    if restart:
        await market.restart_seller()
        assert (await market.rows(listing["listing_id"]))[1] == [("authorized", None, price)]

    # The redelivery looks the settlement up in the engine's ledger and delivers.
    redelivered = await market.buyer.market.redeliver(listing["listing_id"])
    assert redelivered["tx_hash"] == tx_hash and redelivered["price_micro_usdc"] == price
    crystal = await market.buyer.memory.get(redelivered["crystal_id"])
    assert crystal.text == SKILL
    assert await market.rows(listing["listing_id"]) == (
        [("completed", tx_hash, price)], [("delivered", tx_hash, price)])
    assert await market.balances() == (price, BUYER_USDC - price)

    # Delivered exactly once, paid exactly once: neither path delivers or charges again.
    with pytest.raises(PurchaseRefused) as completed:
        await market.buyer.market.redeliver(listing["listing_id"])
    assert completed.value.code == "completed"
    with pytest.raises(PurchaseRefused) as owned:
        await market.buyer.market.buy(listing["listing_id"])
    assert owned.value.code == "already_owned"
    stats = await market.buyer.memory.stats()
    assert sum(1 for p in await market.buyer.market.purchases(100)
               if p["crystal_id"] == redelivered["crystal_id"]) == 1
    assert stats["total"] == 1  # the one bought crystal, stored once
    assert await market.balances() == (price, BUYER_USDC - price)
    engine = market.seller.engine
    assert engine is not None
    assert await trio.to_thread.run_sync(engine.ledger.confirmed_total_micro,
                                         market.seller.wallet_address) == price


async def test_a_paid_request_id_does_not_unlock_another_listing(market: Market) -> None:
    """Issue 11 row 2: after paying for L1, the buyer's own node replays L1's request id for
    L2 with a value-0 authorization, and with L1's very authorization; neither delivers L2."""
    first = await market.publish(SKILL)
    second = await market.publish(OTHER, category="dns")
    await market.known_to_buyer(first, second)
    p1, p2 = first["price_micro_usdc"], second["price_micro_usdc"]
    bought = await market.buyer.market.buy(first["listing_id"])
    [paid] = [p for p in await market.buyer.memory.run(market.buyer.ledger.purchases, 10)
              if p.listing_id == first["listing_id"]]
    assert paid.request_id == bought["request_id"] and paid.authorization_json is not None
    assert await market.balances() == (p1, BUYER_USDC - p1)

    chain, buyer = market.chain, market.buyer
    junk = sign_authorization(buyer.wallet, chain_id=chain.chain_id,
                              token_address=chain.token_address, to=market.seller.wallet_address,
                              value_micro=0, valid_for_s=240)
    replayed = authorization_from_json(paid.authorization_json)
    for authorization in (junk, replayed):
        reply = await market.ask_seller(
            payment_message(paid.request_id, second["listing_id"], authorization))
        answer: Any = reply.message()
        assert isinstance(answer, ErrorReply) and not isinstance(answer, Delivery), reply.kind
        assert answer.code == "bad_request" and "another purchase" in answer.message, answer

    assert await market.rows(second["listing_id"]) == ([], [])
    assert await market.balances() == (p1, BUYER_USDC - p1)
    assert (await market.buyer.memory.stats())["total"] == 1  # L1's crystal only

    # L2 is still for sale, at its price.
    again = await market.buyer.market.buy(second["listing_id"])
    assert again["request_id"] != paid.request_id
    assert await market.rows(second["listing_id"]) == (
        [("completed", again["tx_hash"], p2)], [("delivered", again["tx_hash"], p2)])
    assert await market.balances() == (p1 + p2, BUYER_USDC - p1 - p2)
