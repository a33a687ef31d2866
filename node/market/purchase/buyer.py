"""Buyer side of ``/crystalmesh/purchase/1``.

``Buyer.buy(listing_id)`` runs the whole exchange: gate and spend caps are
checked before any money is committed; the purchase is recorded before the
signed authorization leaves the node; the delivery is accepted only if its
hash equals the listing's and the chain shows the exact transfer; then the
skill is ingested as a crystal (origin peer, provenance "imported") through
the trust gate and a signed receipt goes back to the seller.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from eth_account.signers.local import LocalAccount

from node.chain import ChainClient, sign_authorization
from node.config import NodeConfig
from node.crystals import Crystal, now_ms
from node.market.book import ListingBook, StoredListing
from node.market.ledger import DAY_MS, MarketLedger, Purchase
from node.market.purchase.errors import DEFINITIVE_REFUSALS, PurchaseError, PurchaseRefused
from node.market.purchase.payment_proof import settled_tx, transfer_problem
from node.market.purchase.skill_import import imported_skill
from node.market.purchase.terms import check_caps, check_requirements
from node.market.purchase.wire import authorization_from_json, authorization_json, payment_message
from node.memory import AsyncMemory
from node.net import PeerBusy, PeerUnreachable, ReqRespError
from node.trust import GateDecision, TrustLevel
from protocol.envelope import Envelope, seal
from protocol.identity import Identity, peer_id_from_public_key
from protocol.messages import (
    Delivery,
    DeliveryRequest,
    ErrorReply,
    Message,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
)

__all__ = ["Buyer", "Gate", "PurchaseError", "PurchaseRefused", "admit_all"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
Request = Callable[[str, bytes, float], Awaitable[Envelope]]
MAX_AUTHORIZATION_VALIDITY_S = 600


Gate = Callable[[bytes], Awaitable[GateDecision]]


async def admit_all(seller_key: bytes) -> GateDecision:
    """The gate for a node without a trust layer (tests of the purchase flow alone)."""
    return GateDecision(True, TrustLevel.PROVISIONAL, "no trust layer configured")


class Buyer:
    def __init__(
        self,
        config: NodeConfig,
        identity: Identity,
        next_seq: Callable[[], int],
        request: Request,
        memory: AsyncMemory,
        listings: ListingBook,
        ledger: MarketLedger,
        wallet: LocalAccount,
        chain: Callable[[], ChainClient | None],
        gate: Gate = admit_all,
        on_outcome: Callable[[bytes, str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.identity = identity
        self.next_seq = next_seq
        self.request = request
        self.memory = memory
        self.listings = listings
        self.ledger = ledger
        self.wallet = wallet
        self.chain = chain
        self.gate = gate
        self.on_outcome = on_outcome  # (seller key, event, detail) for the trust ledger
        self._lock = trio.Lock()  # serialises cap checks with the purchase record

    def _seal(self, message: Message) -> bytes:
        return seal(self.identity, message.KIND, message, self.next_seq(), now_ms())

    async def _exchange(self, peer: str, message: Message, expect: type[M], timeout_s: float) -> M:
        try:
            envelope = await self.request(peer, self._seal(message), timeout_s)
        except PeerUnreachable as error:
            raise PurchaseError(f"seller unreachable: {error}", "seller_unreachable") from error
        except PeerBusy as error:
            raise PurchaseError(f"seller busy: {error}", "seller_busy") from error
        except ReqRespError as error:
            # Up and connected, but this exchange broke (reset, timeout): not "gone".
            raise PurchaseError(f"exchange with the seller failed: {error}",
                                "seller_exchange_failed") from error
        reply = envelope.message()
        if isinstance(reply, ErrorReply):
            raise PurchaseRefused(f"seller refused: {reply.code}: {reply.message}", reply.code)
        if not isinstance(reply, expect):
            raise PurchaseError(f"seller answered {envelope.kind}, expected {expect.KIND}", "protocol")
        return reply

    async def _outcome(self, seller_key: bytes, event: str, detail: str) -> None:
        if self.on_outcome:
            await self.on_outcome(seller_key, event, detail)

    # --- the purchase -------------------------------------------------------------------------
    async def buy(self, listing_id: str, max_price_micro_usdc: int | None = None,
                  again: bool = False) -> dict[str, Any]:
        """Buy ``listing_id``; the whole purchase honours ``market.purchase_timeout_s``.

        On timeout the purchase is left ``pending`` (its authorization may still
        settle, and counts against the daily cap); running ``buy`` again resends the
        same authorization or collects the settled payment, never pays twice.
        """
        timeout_s = self.config.market.purchase_timeout_s
        with trio.move_on_after(timeout_s):
            return await self._buy(listing_id, max_price_micro_usdc, again)
        latest = await self.memory.run(self.ledger.latest_purchase, listing_id)
        if latest is not None and latest.state == "authorized":
            await self.memory.run(self.ledger.update_purchase, latest.request_id, "pending",
                                  reason=f"timed out after {timeout_s} s")
        raise PurchaseError(
            f"the purchase timed out after {timeout_s} s (seller or chain not answering). If a "
            f"payment was signed it may still settle; `crystalmesh skill buy {listing_id}` again "
            "resends the same authorization (it can never be paid twice) and collects the skill",
            "timeout")

    async def _buy(self, listing_id: str, max_price_micro_usdc: int | None,
                   again: bool) -> dict[str, Any]:
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
        decision = await self.gate(stored.seller_key)
        if not decision.admitted:
            raise PurchaseRefused(
                f"ingestion gate refused seller at trust level {decision.level}: {decision.reason}",
                "gate")
        seller = peer_id_from_public_key(stored.seller_key)
        timeout = self.config.market.purchase_timeout_s
        request_id = secrets.token_hex(16)

        requirements = await self._exchange(
            seller,
            PurchaseRequest(request_id=request_id, listing_id=listing.listing_id,
                            buyer_address=self.wallet.address),
            PaymentRequirements,
            timeout,
        )
        check_requirements(stored, requirements)
        price = requirements.price_micro_usdc
        async with self._lock:
            await self._check_caps(price, max_price_micro_usdc)
            valid_before = min(requirements.valid_before_s,
                               int(time.time()) + MAX_AUTHORIZATION_VALIDITY_S)
            authorization = sign_authorization(
                self.wallet,
                chain_id=listing.chain_id,
                token_address=listing.token_address,
                to=requirements.pay_to,
                value_micro=price,
                valid_before_s=valid_before,
            )
            created = now_ms()
            await self.memory.run(self.ledger.record_purchase, Purchase(
                request_id=request_id, listing_id=listing.listing_id,
                seller_key=stored.seller_key.hex(), name=listing.name, price_micro_usdc=price,
                pay_to=requirements.pay_to, auth_nonce="0x" + authorization.nonce.hex(),
                state="authorized", tx_hash=None, crystal_id=None, reason=None,
                created_at_ms=created, updated_at_ms=created,
                authorization_json=authorization_json(authorization),
                valid_before_s=authorization.valid_before_s,
            ))
        payment = payment_message(request_id, listing.listing_id, authorization)
        try:
            delivery = await self._exchange(seller, payment, Delivery, timeout)
        except PurchaseError as error:
            await self._after_failed_delivery(request_id, stored, authorization.nonce, error)
            raise
        return await self._accept(request_id, stored, delivery, price)

    async def _check_caps(self, price: int, max_price: int | None) -> None:
        spent = await self.memory.run(self.ledger.spent_since, now_ms() - DAY_MS)
        check_caps(self.config.market, price, max_price, spent)

    async def _after_failed_delivery(self, request_id: str, stored: StoredListing, nonce: bytes,
                                     error: PurchaseError) -> None:
        """The authorization left the node but no delivery came back: did money move?

        Only the chain knows. Settled: ``paid_undelivered`` (redeliver). A seller that
        answered with a definitive refusal did not settle: ``refused``. Anything else
        (unreachable, timeout, a failed or stalled settlement) may still settle until
        the authorization's ``validBefore``: ``pending``, counted against the daily
        cap; a retry resends the same authorization instead of signing another. A
        crash is not a tamper: none of these is held against the seller's trust.
        """
        tx_hash = await self._settled_tx(nonce)
        listing_id = stored.listing.listing_id
        if tx_hash:
            await self.memory.run(self.ledger.update_purchase, request_id, "paid_undelivered",
                                  tx_hash=tx_hash, reason=str(error))
            error.money_moved = True
            error.args = (f"{error}. The payment settled in {tx_hash} but nothing was delivered; "
                          f"retry with `crystalmesh skill redeliver {listing_id}`",)
            return
        if isinstance(error, PurchaseRefused) and error.code in DEFINITIVE_REFUSALS:
            await self.memory.run(self.ledger.update_purchase, request_id, "refused", reason=str(error))
            return
        await self.memory.run(self.ledger.update_purchase, request_id, "pending", reason=str(error))
        error.args = (f"{error}. The signed payment may still settle; `crystalmesh skill buy "
                      f"{listing_id}` again resends the same authorization (it can never be paid "
                      "twice) and collects the skill",)

    async def _settled_tx(self, nonce: bytes) -> str | None:
        return await settled_tx(self.chain(), self.wallet.address, nonce)

    async def _verify_transfer(self, tx_hash: str, pay_to: str, price: int) -> str | None:
        return await transfer_problem(self.chain(), tx_hash, self.wallet.address, pay_to, price)

    async def _accept(self, request_id: str, stored: StoredListing, delivery: Delivery,
                      price: int) -> dict[str, Any]:
        listing = stored.listing
        seller = peer_id_from_public_key(stored.seller_key)
        # Delivery.check() already verified sha256(payload) == delivery.content_hash.
        if delivery.content_hash != listing.content_hash or delivery.listing_id != listing.listing_id:
            problem = await self._verify_transfer(delivery.tx_hash, listing.pay_to, price)
            await self.memory.run(self.ledger.update_purchase, request_id, "tampered",
                                  tx_hash=delivery.tx_hash,
                                  reason="delivered content does not match the listing's hash")
            await self._outcome(stored.seller_key, "delivery_tampered", "hash mismatch")
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=False)
            raise PurchaseError(
                "delivered skill does not match the listing's content hash; it was NOT ingested"
                + ("" if problem else f" (payment {delivery.tx_hash} did settle)"),
                "tampered", money_moved=problem is None)
        problem = await self._verify_transfer(delivery.tx_hash, listing.pay_to, price)
        if problem:
            await self.memory.run(self.ledger.update_purchase, request_id, "failed",
                                  tx_hash=delivery.tx_hash, reason=problem)
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=False)
            raise PurchaseError(f"payment not verified on chain: {problem}", "unverified_payment")
        await self.memory.run(self.ledger.update_purchase, request_id, "paid", tx_hash=delivery.tx_hash)
        decision = await self.gate(stored.seller_key)
        if not decision.admitted:
            # Paid for and delivered: the buyer keeps it. The gate only keeps it out of memory.
            await self.memory.run(self.ledger.update_purchase, request_id, "delivered_not_ingested",
                                  reason=f"ingestion gate: {decision.reason}",
                                  payload=delivery.payload)
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=True)
            return {"request_id": request_id, "listing_id": listing.listing_id,
                    "price_micro_usdc": price, "tx_hash": delivery.tx_hash, "crystal_id": None,
                    "seller_key": stored.seller_key.hex(), "ingested": False,
                    "not_ingested_because": decision.reason, "payload": delivery.payload}
        crystal = await self._ingest(stored, delivery)
        await self.memory.run(self.ledger.update_purchase, request_id, "completed",
                              crystal_id=crystal.id)
        await self._outcome(stored.seller_key, "delivered_ok", listing.listing_id)
        await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=True)
        return {
            "request_id": request_id,
            "listing_id": listing.listing_id,
            "price_micro_usdc": price,
            "tx_hash": delivery.tx_hash,
            "crystal_id": crystal.id,
            "seller_key": stored.seller_key.hex(),
            "content_hash": delivery.content_hash,
            "ingested": True,
        }

    async def _send_receipt(self, seller: str, request_id: str, listing_id: str, delivery: Delivery,
                            ok: bool) -> None:
        receipt = Receipt(request_id=request_id, listing_id=listing_id, tx_hash=delivery.tx_hash,
                          content_hash=delivery.content_hash, ok=ok)
        try:
            await self.request(seller, self._seal(receipt), 5.0)
        except ReqRespError as error:
            log.info("receipt not delivered seller=%s error=%s", seller, error)

    async def _ingest(self, stored: StoredListing, delivery: Delivery) -> Crystal:
        existing = await self.memory.find_by_hash(delivery.content_hash)
        if existing is not None:
            return existing
        return await self.memory.add_prepared(
            imported_skill(stored, delivery, self.config.net.management_keys))

    async def _resume(self, previous: Purchase, stored: StoredListing,
                      again: bool) -> dict[str, Any] | None:
        """A purchase of this listing exists: finish it rather than pay a second time."""
        listing_id = stored.listing.listing_id
        if previous.state in ("completed", "delivered_not_ingested") and not again:
            raise PurchaseRefused(
                f"this node already bought {listing_id[:16]} (crystal {previous.crystal_id}); "
                "buy it again with --again", "already_owned")
        if previous.state == "paid_undelivered":
            return await self.redeliver(listing_id)
        if previous.state not in ("authorized", "pending") or previous.auth_nonce is None:
            return None
        tx_hash = await self._settled_tx(bytes.fromhex(previous.auth_nonce[2:]))
        if tx_hash:
            await self.memory.run(self.ledger.update_purchase, previous.request_id,
                                  "paid_undelivered", tx_hash=tx_hash, reason=previous.reason)
            return await self.redeliver(listing_id)
        live = (previous.authorization_json is not None and previous.valid_before_s is not None
                and previous.valid_before_s > int(time.time()) + 5)
        if not live:
            # Expired unsettled: it can never settle any more.
            await self.memory.run(self.ledger.update_purchase, previous.request_id, "failed",
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

    async def redeliver(self, listing_id: str) -> dict[str, Any]:
        """Ask the seller again for a skill this node paid for but did not receive."""
        purchase = await self.memory.run(self.ledger.latest_purchase, listing_id)
        if purchase is None:
            raise PurchaseRefused(f"no purchase of {listing_id} recorded", "unknown_purchase")
        if purchase.state == "completed":
            raise PurchaseRefused(f"already received as crystal {purchase.crystal_id}", "completed")
        if purchase.state == "delivered_not_ingested" and purchase.payload is not None:
            return {"request_id": purchase.request_id, "listing_id": purchase.listing_id,
                    "price_micro_usdc": purchase.price_micro_usdc, "tx_hash": purchase.tx_hash,
                    "crystal_id": None, "ingested": False, "payload": purchase.payload}
        stored = await self.memory.run(self.listings.get, purchase.listing_id)
        if stored is None:
            raise PurchaseRefused("the listing is no longer known", "unknown_listing")
        tx_hash = purchase.tx_hash
        if not tx_hash and purchase.auth_nonce:
            tx_hash = await self._settled_tx(bytes.fromhex(purchase.auth_nonce[2:]))
        if not tx_hash:
            raise PurchaseRefused("the payment never settled on chain: nothing to redeliver",
                                  "not_paid")
        delivery = await self._exchange(
            peer_id_from_public_key(stored.seller_key),
            DeliveryRequest(request_id=purchase.request_id, listing_id=purchase.listing_id,
                            tx_hash=tx_hash),
            Delivery,
            self.config.market.purchase_timeout_s,
        )
        return await self._accept(purchase.request_id, stored, delivery, purchase.price_micro_usdc)
