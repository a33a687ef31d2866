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

``batch-settlement`` (a channel voucher; :class:`node.chain.ChannelPayments`, the x402
SDK's server scheme): the SDK checks the voucher (one ECDSA recover, or the buyer's
deposit submitted on chain), then the voucher is *recorded* through ``record_voucher``
(a :class:`VoucherSale` in, whether it was recorded out) before the skill is returned;
nothing is delivered on a voucher that is not recorded. The sale's ``request_id`` is
derived from (channel id, voucher total): the same voucher sent again while it is the
channel's latest gets the same delivery, never a second charge.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from node import metrics
from node.chain import (
    Authorization,
    ChainError,
    ChainUnavailable,
    ChannelPayments,
    ChannelRefunded,
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
from node.market.purchase.channels import SCHEME_VOUCHER
from node.market.purchase.seller import CLOCK_SLACK_S, QUOTE_VALID_S, Refusal, Seller
from node.market.states import SaleState
from protocol.purchase import content_hash

log = logging.getLogger(__name__)

BUYER_KEY_PREFIX = "x402:"


def x402_request_id(authorization: Authorization) -> str:
    """The sale id of an HTTP purchase: 32 hex of sha256("x402|<payer>|<nonce hex>")."""
    payer, nonce = authorization.key
    return hashlib.sha256(f"x402|{payer.lower()}|{nonce}".encode()).hexdigest()[:32]


def x402_voucher_request_id(channel_id: str, total_micro: int) -> str:
    """The sale id of an HTTP voucher purchase: 32 hex of sha256("x402-voucher|<channel>|<total>")."""
    return hashlib.sha256(f"x402-voucher|{channel_id.lower()}|{int(total_micro)}".encode()).hexdigest()[:32]


def offer_for(listing: Any, channels: ChannelPayments | None = None) -> Offer:
    """A listing's x402 terms: the price it is announced at, valid for the quote window;
    with ``batch-settlement`` too when the seller takes channel payments to this payee."""
    channel_requirements = None
    if channels is not None and listing.pay_to.lower() == channels.wallet.address.lower():
        channel_requirements = channels.requirements(
            pay_to=listing.pay_to, price_micro=listing.price_micro_usdc, max_timeout_s=QUOTE_VALID_S)
    return Offer(
        listing_id=listing.listing_id,
        name=listing.name,
        description=listing.description or listing.name,
        requirements=payment_requirements(
            chain_id=listing.chain_id, token_address=listing.token_address,
            pay_to=listing.pay_to, price_micro=listing.price_micro_usdc,
            max_timeout_s=QUOTE_VALID_S),
        channel_requirements=channel_requirements,
    )


@dataclass(frozen=True)
class VoucherSale:
    """A verified voucher paying for one listing: what ``record_voucher`` records durably
    before the skill is delivered (the channel's latest voucher, claimable by the seller)."""

    request_id: str
    listing_id: str
    crystal_id: str
    stable_skill_id: str
    payer: str
    channel_id: str
    voucher_total_micro: int
    signature: str
    price_micro_usdc: int
    deposit_tx: str | None


RecordVoucher = Callable[[VoucherSale], Awaitable[bool]]


class X402Seller:
    """:class:`node.chain.x402_server.X402Merchant` over the node's :class:`Seller`.

    ``channels`` (optional): ``batch-settlement`` payments; ``record_voucher`` (optional):
    where a voucher sale is recorded, default :meth:`record_voucher_sale` (the sales table).
    """

    def __init__(self, seller: Seller, channels: ChannelPayments | None = None,
                 record_voucher: RecordVoucher | None = None) -> None:
        self.seller = seller
        self.channels = channels
        self.record_voucher: RecordVoucher = record_voucher or self.record_voucher_sale
        self._locks: dict[str, tuple[trio.Lock, int]] = {}

    async def _channels_now(self) -> ChannelPayments | None:
        if self.channels is None or not await trio.to_thread.run_sync(self.channels.available):
            return None
        return self.channels

    async def offers(self) -> list[Offer]:
        own = await self.seller.memory.run(self.seller.listings.own_active)
        channels = await self._channels_now()
        return [offer_for(stored.listing, channels) for stored in own]

    async def offer(self, listing_id: str) -> Offer:
        found = await self.seller._sellable(listing_id)
        if isinstance(found, Refusal):
            raise ResourceUnavailable(found.message)
        return offer_for(found[0].listing, await self._channels_now())

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

    # --- batch-settlement -----------------------------------------------------------------

    async def sell_by_channel(self, offer: Offer, payment: dict[str, Any],
                              resource: dict[str, Any]) -> Sold | ChannelRefunded:
        channels = self.channels
        if channels is None:
            raise PaymentRejected("wrong_scheme", "this seller takes exact payments only")
        voucher = _voucher_fields(payment)
        request_id = x402_voucher_request_id(voucher[0], voucher[1])
        refund_request = payment["payload"].get("type") == "refund"
        async with self._exclusive(request_id):
            # A refund request signs the channel's current total again (the same signature as
            # the last purchase): it is never a re-delivery.
            again = None if refund_request else await self._voucher_again(channels, offer, request_id, voucher)
            if again is not None:
                return again
            verified = await trio.to_thread.run_sync(channels.verify, payment, offer.channel_requirements, resource)
            if verified.refund:
                refunded = await trio.to_thread.run_sync(channels.settle, verified)
                log.info("x402 channel refund channel=%s tx=%s", verified.channel_id[:18], refunded.transaction)
                return ChannelRefunded(amount_micro=int(refunded.response.get("amount") or 0),
                                       receipt=refunded.response)
            found = await self.seller._sellable(offer.listing_id)
            if isinstance(found, Refusal):
                await trio.to_thread.run_sync(channels.cancel, verified)
                raise ResourceUnavailable(found.message)
            stored, crystal = found
            settled = await trio.to_thread.run_sync(channels.settle, verified)
            sale = VoucherSale(
                request_id=request_id, listing_id=stored.listing.listing_id, crystal_id=crystal.id,
                stable_skill_id=stored.listing.stable_skill_id, payer=verified.payer,
                channel_id=verified.channel_id, voucher_total_micro=verified.max_claimable_micro,
                signature=verified.signature, price_micro_usdc=stored.listing.price_micro_usdc,
                deposit_tx=settled.transaction or None)
            if not await self.record_voucher(sale):
                raise ChainError("the voucher could not be recorded: nothing delivered")
            log.info("x402 voucher sale listing=%s channel=%s total=%d", sale.listing_id[:16],
                     sale.channel_id[:18], sale.voucher_total_micro)
            return Sold(listing_id=sale.listing_id, name=stored.listing.name, payload=crystal.text,
                        content_hash=content_hash(crystal.text), tx_hash=settled.transaction,
                        payer=sale.payer, amount_micro=sale.price_micro_usdc,
                        chain_id=stored.listing.chain_id, receipt=settled.response)

    async def _voucher_again(self, channels: ChannelPayments, offer: Offer, request_id: str,
                             voucher: tuple[str, int, str]) -> Sold | None:
        """The delivery of a voucher already recorded, if it is still the channel's latest and
        carries the recorded signature (the buyer lost the answer); None otherwise."""
        seller = self.seller
        existing = await seller.memory.run(seller.ledger.get_sale, request_id)
        if existing is None:
            return None
        if existing.listing_id != offer.listing_id or existing.auth_nonce != voucher[2].lower():
            raise PaymentRejected("replayed", "this voucher paid for another purchase")
        receipt = await trio.to_thread.run_sync(
            channels.replay_receipt, voucher[0], voucher[1], existing.price_micro_usdc, existing.buyer_address)
        if receipt is None:
            raise PaymentRejected("replayed", "the channel has moved past this voucher")
        sold = await self._sold(existing, existing.tx_hash or "")
        return Sold(**{**sold.__dict__, "receipt": receipt})

    async def record_voucher_sale(self, sale: VoucherSale) -> bool:
        """The default voucher record: a delivered sale row keyed by (channel, total), with
        the voucher's signature in ``auth_nonce``; the latest signature per channel is also
        in the SDK's channel store (what :meth:`ChannelPayments.claim_and_settle` claims)."""
        seller = self.seller
        created = now_ms()
        row = Sale(
            request_id=sale.request_id, listing_id=sale.listing_id, crystal_id=sale.crystal_id,
            stable_skill_id=sale.stable_skill_id, buyer_key=BUYER_KEY_PREFIX + sale.payer,
            buyer_address=sale.payer, price_micro_usdc=sale.price_micro_usdc,
            auth_nonce=sale.signature.lower(), state=SaleState.DELIVERED, tx_hash=sale.deposit_tx,
            reason=f"voucher {sale.channel_id} total {sale.voucher_total_micro}",
            created_at_ms=created, updated_at_ms=created, scheme=SCHEME_VOUCHER,
            channel_id=sale.channel_id.lower(), voucher_total=sale.voucher_total_micro)
        try:
            await seller.memory.run(seller.ledger.record_sale, row)
        except Exception as error:
            log.warning("voucher sale not recorded request=%s error=%s", sale.request_id, error)
            return False
        if seller.on_sale:
            await seller.on_sale(row)
        return True

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


def _voucher_fields(payment: dict[str, Any]) -> tuple[str, int, str]:
    """(channel id, total, signature) of a batch-settlement payment, checked for shape only
    (the SDK checks what they mean)."""
    inner = payment.get("payload")
    voucher = inner.get("voucher") if isinstance(inner, dict) else None
    if not isinstance(voucher, dict):
        raise PaymentRejected("malformed", "batch-settlement payment without a voucher")
    channel_id, total, signature = voucher.get("channelId"), voucher.get("maxClaimableAmount"), voucher.get("signature")
    if not (isinstance(channel_id, str) and re.fullmatch(r"0x[0-9a-fA-F]{64}", channel_id)
            and isinstance(total, str) and total.isdigit() and len(total) <= 39
            and isinstance(signature, str) and re.fullmatch(r"0x[0-9a-fA-F]{130,1000}", signature)):
        raise PaymentRejected("malformed", "batch-settlement voucher fields")
    return channel_id.lower(), int(total), signature


def _sold(sale: Sale, stored: StoredListing, payload: str, tx_hash: str) -> Sold:
    return Sold(listing_id=sale.listing_id, name=stored.listing.name, payload=payload,
                content_hash=content_hash(payload), tx_hash=tx_hash, payer=sale.buyer_address,
                amount_micro=sale.price_micro_usdc, chain_id=stored.listing.chain_id)


async def serve_seller(seller: Seller, host: str, port: int, channels: ChannelPayments | None = None,
                       record_voucher: RecordVoucher | None = None,
                       task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``seller``'s listings over x402 on ``host:port``; ``started`` with the base URL."""
    merchant = X402Seller(seller, channels, record_voucher)
    await serve_x402(build_x402_app(merchant), host, port, task_status=task_status)
