"""The seller's side of x402 over HTTP: own listings as x402 resources.

The HTTP shapes are :mod:`node.chain.x402_server`'s; this is what a sale means,
with the same rules as the libp2p purchase path (:mod:`node.market.purchase.seller`):
only the node's own, live, shareable listings are sold; the sale row is written
before settlement; the settlement engine accepts one authorization once.

An HTTP buyer has no libp2p key, so its purchase is named by its payment: the
sale's ``request_id`` is derived from (payer, EIP-3009 nonce) and its
``buyer_key`` is ``x402:<payer address>``. Presenting the same authorization
again (a retry after a lost answer, or a replay) finds that sale and returns the
same delivery without a second charge; two copies in flight at once are
serialised on that key.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from node import metrics
from node.chain import (
    Authorization,
    ChainError,
    ChainUnavailable,
    Offer,
    PaymentRejected,
    ResourceUnavailable,
    Sold,
    build_x402_app,
    payment_requirements,
    serve_x402,
)
from node.crystals import CrystalNotFound, now_ms
from node.market.book import StoredListing
from node.market.ledger import SALE_SETTLED_STATES, Sale
from node.market.purchase.seller import CLOCK_SLACK_S, QUOTE_VALID_S, Refusal, Seller
from node.market.states import SaleState
from protocol.purchase import content_hash

log = logging.getLogger(__name__)

BUYER_KEY_PREFIX = "x402:"


def x402_request_id(authorization: Authorization) -> str:
    """The sale id of an HTTP purchase: 32 hex of sha256("x402|<payer>|<nonce hex>")."""
    payer, nonce = authorization.key
    return hashlib.sha256(f"x402|{payer.lower()}|{nonce}".encode()).hexdigest()[:32]


def offer_for(listing: Any) -> Offer:
    """A listing's x402 terms: the price it is announced at, valid for the quote window."""
    return Offer(
        listing_id=listing.listing_id,
        name=listing.name,
        description=listing.description or listing.name,
        requirements=payment_requirements(
            chain_id=listing.chain_id, token_address=listing.token_address,
            pay_to=listing.pay_to, price_micro=listing.price_micro_usdc,
            max_timeout_s=QUOTE_VALID_S),
    )


class X402Seller:
    """:class:`node.chain.x402_server.X402Merchant` over the node's :class:`Seller`."""

    def __init__(self, seller: Seller) -> None:
        self.seller = seller
        self._locks: dict[str, tuple[trio.Lock, int]] = {}

    async def offers(self) -> list[Offer]:
        own = await self.seller.memory.run(self.seller.listings.own_active)
        return [offer_for(stored.listing) for stored in own]

    async def offer(self, listing_id: str) -> Offer:
        found = await self.seller._sellable(listing_id)
        if isinstance(found, Refusal):
            raise ResourceUnavailable(found.message)
        return offer_for(found[0].listing)

    @asynccontextmanager
    async def _exclusive(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (trio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def sell(self, offer: Offer, authorization: Authorization) -> Sold:
        request_id = x402_request_id(authorization)
        async with self._exclusive(request_id):
            return await self._sell_once(request_id, offer, authorization)

    async def _sell_once(self, request_id: str, offer: Offer, authorization: Authorization) -> Sold:
        seller = self.seller
        existing = await seller.memory.run(seller.ledger.get_sale, request_id)
        if existing is not None and existing.listing_id != offer.listing_id:
            raise PaymentRejected("replayed", "this authorization paid for another listing")
        if existing is not None and existing.state in SALE_SETTLED_STATES and existing.tx_hash:
            return await self._sold(existing, existing.tx_hash)
        found = await seller._sellable(offer.listing_id)
        if isinstance(found, Refusal):
            raise ResourceUnavailable(found.message)
        stored, crystal = found
        engine = seller.engine()
        if engine is None:
            raise ChainUnavailable("this node has no chain configured")
        if authorization.valid_before_s > int(time.time()) + QUOTE_VALID_S + CLOCK_SLACK_S:
            raise PaymentRejected("expired", f"authorization outlives the {QUOTE_VALID_S} s quote window")
        price = stored.listing.price_micro_usdc
        if existing is None:
            # Check everything (signature, terms, nonce unused, balance) before writing
            # anything: a refused payment leaves no sale row behind.
            await trio.to_thread.run_sync(functools.partial(
                engine.verify, authorization, pay_to=seller.pay_to, price_micro=price))
        created = now_ms()
        sale = Sale(
            request_id=request_id, listing_id=stored.listing.listing_id, crystal_id=crystal.id,
            stable_skill_id=stored.listing.stable_skill_id,
            buyer_key=BUYER_KEY_PREFIX + authorization.from_address,
            buyer_address=authorization.from_address, price_micro_usdc=price,
            auth_nonce=authorization.key[1], state=SaleState.AUTHORIZED, tx_hash=None, reason=None,
            created_at_ms=created, updated_at_ms=created,
        )
        await seller.memory.run(seller.ledger.record_sale, sale)
        try:
            settlement = await engine.accept_payment_async(
                authorization, pay_to=seller.pay_to, price_micro=price)
        except PaymentRejected as error:
            # Seen before by the engine (a crash between settling and updating the sale):
            # the settlement ledger, reconciled against the chain, knows whether it paid.
            confirmed = await seller._confirmed_tx(sale) if error.reason == "replayed" else None
            if confirmed is not None:
                await seller.memory.run(seller.ledger.update_sale, request_id, SaleState.SETTLED, confirmed)
                return await self._deliver(sale, stored, crystal.text, confirmed)
            metrics.SETTLEMENTS.labels(outcome="rejected").inc()
            await seller.memory.run(seller.ledger.update_sale, request_id, SaleState.REJECTED, None, str(error))
            raise
        except ChainError as error:
            metrics.SETTLEMENTS.labels(outcome="failed").inc()
            await seller.memory.run(seller.ledger.update_sale, request_id, SaleState.FAILED, None, str(error))
            raise
        metrics.SETTLEMENTS.labels(outcome="ok" if settlement.settled else "failed").inc()
        if not settlement.settled or not settlement.tx_hash:
            reason = settlement.reason or settlement.state
            await seller.memory.run(seller.ledger.update_sale, request_id, SaleState.FAILED,
                                    settlement.tx_hash, reason)
            raise ChainError(f"not settled: {reason}")
        await seller.memory.run(seller.ledger.update_sale, request_id, SaleState.SETTLED, settlement.tx_hash)
        return await self._deliver(sale, stored, crystal.text, settlement.tx_hash)

    async def _deliver(self, sale: Sale, stored: StoredListing, payload: str, tx_hash: str) -> Sold:
        await self.seller.memory.run(self.seller.ledger.update_sale, sale.request_id, SaleState.DELIVERED)
        log.info("x402 sale listing=%s payer=%s tx=%s", sale.listing_id[:16], sale.buyer_address, tx_hash)
        if self.seller.on_sale:
            await self.seller.on_sale(sale)
        return _sold(sale, stored, payload, tx_hash)

    async def _sold(self, sale: Sale, tx_hash: str) -> Sold:
        """The delivery of an already paid sale, again (no charge, no new sale)."""
        seller = self.seller
        stored = await seller.memory.run(seller.listings.get, sale.listing_id)
        if stored is None:
            raise ResourceUnavailable("listing unknown")
        try:
            crystal = await seller.memory.get_stored(sale.crystal_id)
        except CrystalNotFound as error:
            raise ResourceUnavailable("the skill is no longer held by the seller") from error
        return _sold(sale, stored, crystal.text, tx_hash)


def _sold(sale: Sale, stored: StoredListing, payload: str, tx_hash: str) -> Sold:
    return Sold(listing_id=sale.listing_id, name=stored.listing.name, payload=payload,
                content_hash=content_hash(payload), tx_hash=tx_hash, payer=sale.buyer_address,
                amount_micro=sale.price_micro_usdc, chain_id=stored.listing.chain_id)


async def serve_seller(seller: Seller, host: str, port: int,
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``seller``'s listings over x402 on ``host:port``; ``started`` with the base URL."""
    await serve_x402(build_x402_app(X402Seller(seller)), host, port, task_status=task_status)
