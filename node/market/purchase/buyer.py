"""Buyer side of ``/crystalmesh/purchase/1``.

``Buyer.buy(listing_id)`` runs the whole purchase in one round trip to the
seller: gate and spend caps are checked before any money is committed; the
EIP-3009 authorization is signed from the terms of the signed listing the
buyer holds (x402 ``exact``) and recorded before it leaves the node, in the
request itself; the delivery is accepted only if its hash equals the
listing's and the chain shows the exact transfer; then the skill is ingested
as a crystal (origin peer, provenance "imported") through the trust gate and
a signed receipt goes back to the seller. A re-priced listing costs one more
round trip (fresh terms, same nonce: never two payments); a seller that only
speaks the multi-step exchange gets it.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from typing import Any

import trio

from node.chain import Authorization, sign_authorization
from node.crystals import now_ms
from node.market.book import StoredListing
from node.market.ledger import DAY_MS, Purchase
from node.market.purchase.channels import SCHEME_VOUCHER, ExactOnly, VoucherBuying
from node.market.purchase.errors import PurchaseError, PurchaseRefused
from node.market.purchase.receiving import Gate, Receiver, admit_all, expect_reply
from node.market.purchase.terms import check_caps, check_fresh_terms, check_requirements
from node.market.purchase.wire import (
    authorization_from_json,
    authorization_json,
    paid_request,
    payment_message,
)
from node.market.states import PurchaseState
from node.net import progress
from protocol.envelope import REASON_UNKNOWN_KIND, InvalidEnvelope, open_envelope
from protocol.identity import peer_id_from_public_key
from protocol.messages import (
    Delivery,
    ErrorReply,
    Message,
    PaidPurchaseRequest,
    PaymentRequirements,
    PurchaseRequest,
    SkillListing,
    TermsChanged,
)
from protocol.purchase import ERROR_BAD_REQUEST, PAYMENT_WINDOW_S

__all__ = ["Buyer", "Gate", "PurchaseError", "PurchaseRefused", "admit_all"]

log = logging.getLogger(__name__)


class Buyer(VoucherBuying, Receiver):
    """The purchase: caps, terms from the listing, one paid request, fresh terms once."""

    async def buy(self, listing_id: str, max_price_micro_usdc: int | None = None,
                  again: bool = False, exact: bool = False) -> dict[str, Any]:
        """Buy ``listing_id``; the whole purchase honours ``market.purchase_timeout_s``.

        On timeout the purchase is left ``pending`` (its authorization may still
        settle, and counts against the daily cap); running ``buy`` again resends the
        same authorization or collects the settled payment, never pays twice.
        """
        timeout_s = self.config.market.purchase_timeout_s
        with progress.tracking() as trail:
            try:
                with trio.move_on_after(timeout_s):
                    return await self._buy(listing_id, max_price_micro_usdc, again, exact)
            except PurchaseError as error:
                error.phase = error.phase or trail.phase
                if not isinstance(error, PurchaseRefused):
                    log.info("purchase failed listing=%s code=%s phase=%s steps=[%s]",
                             listing_id[:16], error.code, error.phase, trail.describe())
                raise
        latest = await self.memory.run(self.ledger.latest_purchase, listing_id)
        if latest is not None and latest.state == PurchaseState.AUTHORIZED:
            await self.memory.run(self.ledger.update_purchase, latest.request_id, PurchaseState.PENDING,
                                  reason=f"timed out after {timeout_s} s during {trail.phase}")
        log.warning("purchase timed out listing=%s phase=%s steps=[%s]", listing_id[:16],
                    trail.phase, trail.describe())
        raise PurchaseError(
            f"the purchase timed out after {timeout_s} s {_WHILE.get(trail.phase, 'in ' + trail.phase)}. "
            f"If a payment was signed it may still settle; `crystalmesh skill buy {listing_id}` again "
            "resends the same authorization (it can never be paid twice) and collects the skill",
            "timeout", phase=trail.phase)

    async def _buy(self, listing_id: str, max_price_micro_usdc: int | None,
                   again: bool, exact: bool = False) -> dict[str, Any]:
        stored = await self.memory.run(self.listings.get, listing_id)
        if stored is None:
            raise PurchaseRefused(f"unknown listing {listing_id} (see `crystalmesh market list`)",
                                  "unknown_listing")
        listing = stored.listing
        previous = await self.memory.run(self.ledger.latest_purchase, listing.listing_id)
        if previous is not None:
            resumed = await self._resume(previous, stored, again)
            if resumed is not None:
                return resumed
        if stored.own_crystal_id is not None:
            raise PurchaseRefused("that is this node's own listing", "own_listing")
        if stored.superseded_by:
            raise PurchaseRefused(f"listing superseded by {stored.superseded_by}", "superseded")
        if listing.expires_at_ms <= now_ms():
            raise PurchaseRefused("listing expired", "expired")
        if listing.chain_id != self.config.chain.chain_id or (
            listing.token_address.lower() != self.config.chain.token_address.lower()
        ):
            raise PurchaseRefused("listing is priced on another chain or token", "wrong_chain")
        progress.step("gate")
        decision = await self.gate(stored.seller_key)
        if not decision.admitted:
            raise PurchaseRefused(
                f"ingestion gate refused seller at trust level {decision.level}: {decision.reason}",
                "gate")
        seller = peer_id_from_public_key(stored.seller_key)
        request_id = secrets.token_hex(16)
        price = listing.price_micro_usdc
        if not exact and self.takes_vouchers(stored):
            try:
                return await self._buy_with_voucher(request_id, stored, max_price_micro_usdc)
            except ExactOnly:
                log.info("seller takes exact only, paying with exact seller=%s", seller)
                request_id = secrets.token_hex(16)
        async with self._lock:
            await self._check_caps(price, max_price_micro_usdc)
            authorization = self._sign(listing)
            created = now_ms()
            await self.memory.run(self.ledger.record_purchase, Purchase(
                request_id=request_id, listing_id=listing.listing_id,
                seller_key=stored.seller_key.hex(), name=listing.name, price_micro_usdc=price,
                pay_to=listing.pay_to, auth_nonce="0x" + authorization.nonce.hex(),
                state=PurchaseState.AUTHORIZED, tx_hash=None, crystal_id=None, reason=None,
                created_at_ms=created, updated_at_ms=created,
                authorization_json=authorization_json(authorization),
                valid_before_s=authorization.valid_before_s,
            ))
        ceiling = price if max_price_micro_usdc is None else max_price_micro_usdc
        return await self._pay(seller, request_id, stored, authorization, ceiling,
                               max_price_micro_usdc)

    def _sign(self, listing: SkillListing, nonce: bytes | None = None) -> Authorization:
        """The x402 ``exact`` terms, derived from the seller's signed listing: its price to its
        pay-to, under its chain id and token, valid for ``PAYMENT_WINDOW_S``."""
        return sign_authorization(
            self.wallet,
            chain_id=listing.chain_id,
            token_address=listing.token_address,
            to=listing.pay_to,
            value_micro=listing.price_micro_usdc,
            valid_before_s=int(time.time()) + PAYMENT_WINDOW_S,
            nonce=nonce,
        )

    async def _pay(self, seller: str, request_id: str, stored: StoredListing,
                   authorization: Authorization, ceiling: int,
                   max_price: int | None) -> dict[str, Any]:
        """Send the purchase with its payment: one round trip to the seller.

        The authorization is already in the journal. ``TermsChanged`` (the seller
        re-priced) is answered once, with fresh terms signed under the *same nonce*
        if they stay within ``ceiling``; an older seller that does not know the
        one-round-trip request gets the multi-step exchange with the same authorization.
        """
        round_trips = 1
        try:
            reply = await self._ask(seller, paid_request(request_id, stored.listing.listing_id,
                                                         authorization))
            if _speaks_only_steps(reply):
                log.info("seller speaks only the multi-step purchase seller=%s", seller)
                reply = await self._pay_in_steps(seller, request_id, stored, authorization)
                round_trips = 3
            elif isinstance(reply, TermsChanged):
                stored, authorization = await self._take_fresh_terms(
                    request_id, stored, authorization, reply, ceiling, max_price)
                reply = await self._ask(seller, paid_request(
                    request_id, stored.listing.listing_id, authorization))
                round_trips = 2
                if isinstance(reply, TermsChanged):
                    raise PurchaseRefused("the seller changed its terms again; nothing was paid",
                                          "terms_changed")
            delivery = expect_reply(reply, Delivery)
        except PurchaseError as error:
            await self._after_failed_delivery(request_id, stored, authorization.nonce, error)
            raise
        accepted = await self._accept(request_id, stored, delivery, authorization.value_micro)
        return accepted | {"round_trips": round_trips}

    async def _pay_in_steps(self, seller: str, request_id: str, stored: StoredListing,
                            authorization: Authorization) -> Message:
        """Version 1: ask for the terms, check them against the listing, send the payment."""
        listing = stored.listing
        requirements = expect_reply(await self._ask(seller, PurchaseRequest(
            request_id=request_id, listing_id=listing.listing_id,
            buyer_address=self.wallet.address)), PaymentRequirements)
        check_requirements(stored, requirements)
        return await self._ask(seller, payment_message(request_id, listing.listing_id,
                                                       authorization))

    async def _take_fresh_terms(self, request_id: str, stored: StoredListing,
                                authorization: Authorization, reply: TermsChanged, ceiling: int,
                                max_price: int | None) -> tuple[StoredListing, Authorization]:
        """Sign the seller's current listing in place of the refused authorization, with its
        nonce: whichever of the two reaches the chain, the other never can."""
        try:
            envelope = open_envelope(reply.listing)
        except InvalidEnvelope as error:
            raise PurchaseRefused(f"the seller's fresh terms are not a valid listing: {error}",
                                  "terms_mismatch") from error
        if envelope.sender == stored.seller_key:
            try:  # whatever we decide, the book learns the seller's current listing now
                await self.on_fresh_listing(envelope)
            except InvalidEnvelope as error:
                raise PurchaseRefused(f"the seller's fresh listing is invalid: {error}",
                                      "terms_mismatch") from error
        fresh = check_fresh_terms(stored, envelope.sender, envelope.message(),
                                  authorization.value_micro, authorization.to, ceiling, now_ms())
        stored = dataclasses.replace(stored, listing=fresh, envelope=reply.listing,
                                     issued_at_ms=envelope.issued_at_ms)
        async with self._lock:
            # The journal still counts this purchase at the refused price: swap, not add.
            spent = await self.memory.run(self.ledger.spent_since, now_ms() - DAY_MS)
            check_caps(self.config.market, fresh.price_micro_usdc, max_price,
                       spent - authorization.value_micro)
            fresh_authorization = self._sign(fresh, nonce=authorization.nonce)
            await self.memory.run(self.ledger.reauthorize_purchase, request_id,
                                  fresh.price_micro_usdc, fresh.pay_to,
                                  authorization_json(fresh_authorization),
                                  fresh_authorization.valid_before_s)
        log.info("seller re-priced listing=%s price=%d, signing the fresh terms once",
                 fresh.listing_id[:16], fresh.price_micro_usdc)
        return stored, fresh_authorization

    async def _check_caps(self, price: int, max_price: int | None) -> None:
        spent = await self.memory.run(self.ledger.spent_since, now_ms() - DAY_MS)
        check_caps(self.config.market, price, max_price, spent)

    async def _resume(self, previous: Purchase, stored: StoredListing,
                      again: bool) -> dict[str, Any] | None:
        """A purchase of this listing exists: finish it rather than pay a second time."""
        listing_id = stored.listing.listing_id
        if previous.state in (PurchaseState.COMPLETED, PurchaseState.DELIVERED_NOT_INGESTED) and not again:
            raise PurchaseRefused(
                f"this node already bought {listing_id[:16]} (crystal {previous.crystal_id}); "
                "buy it again with --again", "already_owned")
        if previous.state == PurchaseState.QUARANTINED and not again:
            raise PurchaseRefused(
                f"this node already bought {listing_id[:16]} and quarantined it ({previous.reason}); "
                f"`crystalmesh skill release {listing_id}` takes it in", "quarantined")
        if previous.scheme == SCHEME_VOUCHER:
            if previous.state in (PurchaseState.AUTHORIZED, PurchaseState.PENDING):
                return await self._resume_voucher(previous, stored)
            return None
        if previous.state == PurchaseState.PAID_UNDELIVERED:
            return await self.redeliver(listing_id)
        if previous.state not in (PurchaseState.AUTHORIZED, PurchaseState.PENDING) or previous.auth_nonce is None:
            return None
        tx_hash = await self._settled_tx(bytes.fromhex(previous.auth_nonce[2:]))
        if tx_hash:
            await self.memory.run(self.ledger.update_purchase, previous.request_id,
                                  PurchaseState.PAID_UNDELIVERED, tx_hash=tx_hash, reason=previous.reason)
            return await self.redeliver(listing_id)
        live = (previous.authorization_json is not None and previous.valid_before_s is not None
                and previous.valid_before_s > int(time.time()) + 5)
        if not live:
            # Expired unsettled: it can never settle any more.
            await self.memory.run(self.ledger.update_purchase, previous.request_id, PurchaseState.FAILED,
                                  reason="authorization expired unsettled")
            return None
        assert previous.authorization_json is not None
        authorization = authorization_from_json(previous.authorization_json)
        log.info("resending the live authorization of purchase %s", previous.request_id)
        payment = payment_message(previous.request_id, listing_id, authorization)
        try:
            delivery = await self._exchange(peer_id_from_public_key(stored.seller_key), payment,
                                            Delivery, self.config.market.purchase_timeout_s)
        except PurchaseError as error:
            await self._after_failed_delivery(previous.request_id, stored, authorization.nonce, error)
            raise
        return await self._accept(previous.request_id, stored, delivery,
                                  previous.price_micro_usdc)


# What the buyer was waiting for in each phase (``node.net.progress``), for the timeout message.
_WHILE = {
    "start": "before it began (the node is overloaded)",
    "gate": "while checking the seller's trust",
    "dial": "while dialling the seller",
    "lookup": "while looking the seller's addresses up",
    "circuit": "while connecting to the seller through a relay",
    "stream": "while opening a stream to the seller",
    "answer": "waiting for the seller's answer (it settles the payment on chain first)",
    "verify": "while checking the payment on chain",
    "ingest": "while ingesting the skill",
    "receipt": "while sending the receipt",
}


def _speaks_only_steps(reply: Message) -> bool:
    """An older seller refuses the one-round-trip request before any handler reads it:
    ``unknown_kind`` (it cannot decode it) or "not a request" (it does not serve it)."""
    return isinstance(reply, ErrorReply) and reply.code == ERROR_BAD_REQUEST and (
        reply.message == REASON_UNKNOWN_KIND
        or reply.message.startswith(f"{PaidPurchaseRequest.KIND!r} is not a request"))
