"""Seller side of ``/crystalmesh/purchase/1``.

    PaidPurchaseRequest   → check the authorization against the listing as it stands now:
                            it pays the listed price to the listed pay-to → record the sale,
                            settle on chain, → Delivery (one round trip); it does not →
                            TermsChanged carrying the current signed listing, nothing recorded,
                            nothing settled (and the authorization is never settled later)
    PurchaseRequest       → PaymentRequirements (price, pay-to, asset, chain, valid-before)
    PaymentAuthorization  → record the sale, settle on chain, → Delivery (payload, hash, tx)
    DeliveryRequest       → Delivery again for a sale already settled (buyer lost it)
    Receipt               → acknowledged (the buyer's verdict is logged)

The sale is written to SQLite *before* settlement, so a seller that crashes
after the transfer still knows it owes the skill and redelivers on request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from node import metrics
from node.chain import (
    TOKEN_DOMAIN_NAME,
    TOKEN_DOMAIN_VERSION,
    ChainError,
    ChainUnavailable,
    PaymentRejected,
    SettlementEngine,
)
from node.crystals import LOCAL_ONLY_SCOPES, CrystalNotFound, Sensitivity, now_ms
from node.market.book import ListingBook, StoredListing
from node.market.ledger import MarketLedger, Sale
from node.market.purchase.channels import ChannelChain, ChannelLedger, VoucherSelling
from node.market.purchase.errors import Refusal
from node.market.purchase.wire import authorization_of
from node.market.states import SaleState
from node.memory import AsyncMemory
from protocol.channel import RefundRequest, VoucherPurchaseRequest
from protocol.envelope import Envelope, seal
from protocol.identity import Identity
from protocol.messages import (
    Delivery,
    DeliveryRequest,
    ErrorReply,
    Message,
    PaidPurchaseRequest,
    PaymentAuthorization,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
    TermsChanged,
)
from protocol.purchase import (
    ERROR_BAD_REQUEST,
    ERROR_NOT_FOR_SALE,
    ERROR_PAYMENT_INVALID,
    ERROR_SETTLEMENT_FAILED,
    ERROR_UNKNOWN_LISTING,
    PAYMENT_WINDOW_S,
    TokenDomain,
    content_hash,
)

log = logging.getLogger(__name__)

QUOTE_VALID_S = PAYMENT_WINDOW_S
# Tolerated difference between the buyer's clock and ours when checking validBefore.
CLOCK_SLACK_S = 60
M = TypeVar("M", bound=Message)


class Seller(VoucherSelling):
    def __init__(
        self,
        identity: Identity,
        next_seq: Callable[[], int],
        memory: AsyncMemory,
        listings: ListingBook,
        ledger: MarketLedger,
        engine: Callable[[], SettlementEngine | None],
        pay_to: str,
        on_sale: Callable[[Sale], Awaitable[None]] | None = None,
        *,
        channels: Callable[[], ChannelChain | None] = lambda: None,
        channel_ledger: ChannelLedger | None = None,
        channel_state_ttl_s: float = 60.0,
        channel_min_deposit_micro_usdc: int = 0,
        chain_id: int = 0,
        token_address: str = "",
    ) -> None:
        # Vouchers (``voucher_sale``): the chain's channel facade, if the chain has the
        # contract, and the durable channel record; without them only ``exact`` is sold.
        self.channels = channels
        self.channel_ledger = channel_ledger
        self.channel_state_ttl_s = channel_state_ttl_s
        self.channel_min_deposit_micro_usdc = channel_min_deposit_micro_usdc
        self.chain_id = chain_id
        self.token_address = token_address
        self.identity = identity
        self.next_seq = next_seq
        self.memory = memory
        self.listings = listings
        self.ledger = ledger
        self.engine = engine
        self.pay_to = pay_to
        self.on_sale = on_sale

    def _seal(self, message: Message) -> bytes:
        return seal(self.identity, message.KIND, message, self.next_seq(), now_ms())

    def _error(self, request_id: str, code: str, message: str) -> bytes:
        return self._seal(ErrorReply(request_id=request_id, code=code, message=message[:280]))

    async def handle(self, peer_id: str, envelope: Envelope) -> bytes:
        message = envelope.message()
        if isinstance(message, VoucherPurchaseRequest):
            return await self._sell_voucher(envelope, message)
        if isinstance(message, RefundRequest):
            return await self._refund_channel(envelope, message)
        if isinstance(message, PaidPurchaseRequest):
            return await self._sell_paid(envelope, message)
        if isinstance(message, PurchaseRequest):
            return await self._quote(envelope, message)
        if isinstance(message, PaymentAuthorization):
            return await self._sell(envelope, message)
        if isinstance(message, DeliveryRequest):
            return await self._redeliver(envelope, message)
        if isinstance(message, Receipt):
            log.info("purchase receipt listing=%s tx=%s ok=%s buyer=%s", message.listing_id,
                     message.tx_hash, message.ok, envelope.sender.hex()[:16])
            return self._seal(message)
        return self._error(getattr(message, "request_id", "0" * 32), ERROR_BAD_REQUEST,
                           f"unexpected {envelope.kind}")

    async def _sellable(self, listing_id: str) -> tuple[StoredListing, Any] | Refusal:
        """The own, active listing and its crystal, or why it is not for sale."""
        stored = await self.memory.run(self.listings.get, listing_id)
        if stored is None or stored.own_crystal_id is None:
            return Refusal(ERROR_UNKNOWN_LISTING, f"this node does not sell listing {listing_id[:16]}")
        if stored.superseded_by:
            return Refusal(ERROR_NOT_FOR_SALE, f"superseded by listing {stored.superseded_by[:16]}")
        if stored.listing.expires_at_ms <= now_ms():
            return Refusal(ERROR_NOT_FOR_SALE, "listing expired")
        try:
            crystal = await self.memory.get_stored(stored.own_crystal_id)
        except CrystalNotFound:
            return Refusal(ERROR_NOT_FOR_SALE, "the skill is no longer held by the seller")
        # Scope may have been tightened after listing: never ship a private crystal.
        if (crystal.governance.access_scope in LOCAL_ONLY_SCOPES
                or crystal.governance.sensitivity is Sensitivity.CONFIDENTIAL
                or crystal.hash != stored.listing.content_hash):
            return Refusal(ERROR_NOT_FOR_SALE, "the skill is not available for sale")
        return stored, crystal

    async def _quote(self, envelope: Envelope, request: PurchaseRequest) -> bytes:
        found = await self._sellable(request.listing_id)
        if isinstance(found, Refusal):
            return self._error(request.request_id, found.code, found.message)
        stored, _ = found
        listing = stored.listing
        return self._seal(PaymentRequirements(
            request_id=request.request_id,
            listing_id=listing.listing_id,
            scheme="exact",
            price_micro_usdc=listing.price_micro_usdc,
            pay_to=listing.pay_to,
            asset=listing.token_address,
            chain_id=listing.chain_id,
            valid_before_s=int(time.time()) + QUOTE_VALID_S,
            content_hash=listing.content_hash,
            extra=TokenDomain(name=TOKEN_DOMAIN_NAME, version=TOKEN_DOMAIN_VERSION),
        ))

    async def _sell_paid(self, envelope: Envelope, message: PaidPurchaseRequest) -> bytes:
        """One round trip: the payment came with the request. Terms that are not the
        listing's as it stands now are refused *before* anything is recorded or claimed,
        with the current signed listing: this authorization is never settled."""
        found = await self._sellable(message.listing_id)
        if isinstance(found, Refusal):
            return self._error(message.request_id, found.code, found.message)
        stored, _ = found
        try:
            authorization = authorization_of(message)
        except PaymentRejected as error:
            return self._error(message.request_id, ERROR_PAYMENT_INVALID, str(error))
        listing = stored.listing
        if (authorization.value_micro != listing.price_micro_usdc
                or authorization.to.lower() != listing.pay_to.lower()):
            log.info("paid purchase on stale terms listing=%s offered=%d asked=%d",
                     listing.listing_id[:16], authorization.value_micro, listing.price_micro_usdc)
            return self._seal(TermsChanged(
                request_id=message.request_id, listing_id=listing.listing_id,
                listing=stored.envelope,
                message=(f"the listing asks {listing.price_micro_usdc} micro-USDC to "
                         f"{listing.pay_to}; your authorization was not settled"),
            ))
        return await self._sell(envelope, PaymentAuthorization(
            request_id=message.request_id, listing_id=message.listing_id,
            authorization=message.authorization, signature=message.signature))

    async def _sell(self, envelope: Envelope, message: PaymentAuthorization) -> bytes:
        found = await self._sellable(message.listing_id)
        if isinstance(found, Refusal):
            return self._error(message.request_id, found.code, found.message)
        stored, crystal = found
        engine = self.engine()
        if engine is None:
            return self._error(message.request_id, ERROR_SETTLEMENT_FAILED,
                               "this node has no chain configured")
        try:
            authorization = authorization_of(message)
        except PaymentRejected as error:
            return self._error(message.request_id, ERROR_PAYMENT_INVALID, str(error))
        created = now_ms()
        sale = Sale(
            request_id=message.request_id,
            listing_id=stored.listing.listing_id,
            crystal_id=crystal.id,
            stable_skill_id=stored.listing.stable_skill_id,
            buyer_key=envelope.sender.hex(),
            buyer_address=authorization.from_address,
            price_micro_usdc=stored.listing.price_micro_usdc,
            auth_nonce="0x" + authorization.nonce.hex(),
            state=SaleState.AUTHORIZED,
            tx_hash=None,
            reason=None,
            created_at_ms=created,
            updated_at_ms=created,
        )
        if authorization.valid_before_s > int(time.time()) + QUOTE_VALID_S + CLOCK_SLACK_S:
            return self._error(message.request_id, ERROR_PAYMENT_INVALID,
                               f"authorization outlives the {QUOTE_VALID_S} s quote window")
        existing = await self.memory.run(self.ledger.get_sale, message.request_id)
        if existing is not None:
            # A request id names one purchase: the same buyer, listing and authorization.
            # Anything else reusing it is a new purchase in disguise and must pay.
            if (existing.listing_id, existing.buyer_key, existing.auth_nonce) != (
                sale.listing_id, sale.buyer_key, sale.auth_nonce
            ):
                return self._error(message.request_id, ERROR_BAD_REQUEST,
                                   "request id already used for another purchase")
            if existing.state in (SaleState.SETTLED, SaleState.DELIVERED) and existing.tx_hash:
                return self._deliver(message.request_id, stored, crystal.text, existing.tx_hash)
        await self.memory.run(self.ledger.record_sale, sale)
        try:
            settlement = await engine.accept_payment_async(
                authorization, pay_to=self.pay_to, price_micro=stored.listing.price_micro_usdc
            )
        except PaymentRejected as error:
            metrics.SETTLEMENTS.labels(outcome="rejected").inc()
            await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.REJECTED, None, str(error))
            return self._error(message.request_id, ERROR_PAYMENT_INVALID, str(error))
        except (ChainUnavailable, ChainError) as error:
            metrics.SETTLEMENTS.labels(outcome="failed").inc()
            await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.FAILED, None, str(error))
            return self._error(message.request_id, ERROR_SETTLEMENT_FAILED, str(error))
        metrics.SETTLEMENTS.labels(outcome="ok" if settlement.settled else "failed").inc()
        if not settlement.settled or not settlement.tx_hash:
            reason = settlement.reason or settlement.state
            await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.FAILED,
                                  settlement.tx_hash, reason)
            return self._error(message.request_id, ERROR_SETTLEMENT_FAILED, f"not settled: {reason}")
        await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.SETTLED, settlement.tx_hash)
        reply = self._deliver(message.request_id, stored, crystal.text, settlement.tx_hash)
        await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.DELIVERED)
        if self.on_sale:
            await self.on_sale(sale)
        return reply

    def _deliver(self, request_id: str, stored: StoredListing, payload: str, tx_hash: str) -> bytes:
        return self._seal(Delivery(
            request_id=request_id,
            listing_id=stored.listing.listing_id,
            payload=payload,
            content_hash=content_hash(payload),
            tx_hash=tx_hash,
        ))

    async def _redeliver(self, envelope: Envelope, message: DeliveryRequest) -> bytes:
        sale = await self.memory.run(
            self.ledger.sale_for_redelivery, message.listing_id, envelope.sender.hex(), message.tx_hash
        )
        if sale is None:
            return self._error(message.request_id, ERROR_UNKNOWN_LISTING,
                               "no sale of this listing to you is recorded")
        if sale.state not in (SaleState.SETTLED, SaleState.DELIVERED) or sale.tx_hash != message.tx_hash:
            # A crash may have left the sale 'authorized' after the transfer went through:
            # ask the settlement ledger (reconciled against the chain at start-up).
            confirmed = await self._confirmed_tx(sale)
            if confirmed != message.tx_hash:
                return self._error(message.request_id, ERROR_PAYMENT_INVALID,
                                   "that transaction does not settle a sale to you")
            await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.SETTLED, confirmed)
        stored = await self.memory.run(self.listings.get, sale.listing_id)
        if stored is None:
            return self._error(message.request_id, ERROR_UNKNOWN_LISTING, "listing unknown")
        try:
            crystal = await self.memory.get_stored(sale.crystal_id)
        except CrystalNotFound:
            return self._error(message.request_id, ERROR_NOT_FOR_SALE, "the skill is gone")
        await self.memory.run(self.ledger.update_sale, sale.request_id, SaleState.DELIVERED)
        return self._deliver(message.request_id, stored, crystal.text, message.tx_hash)

    async def _confirmed_tx(self, sale: Sale) -> str | None:
        engine = self.engine()
        if engine is None or sale.auth_nonce is None:
            return None
        key = (sale.buyer_address, sale.auth_nonce)
        row = await trio.to_thread.run_sync(engine.ledger.get, key)
        if row is not None and not row.settled:
            rows = await engine.reconcile_async()
            row = next((r for r in rows if r.key == key), row)
        return row.tx_hash if row is not None and row.settled else None
