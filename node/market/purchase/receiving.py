"""The buyer's half that talks to the seller and takes what it sends.

A :class:`Receiver` sends one request and reads the answer (busy, unreachable and a broken
exchange told apart), accepts a delivery only if its hash is the listing's and the chain
shows the exact transfer, scans it (``node.market.scan``: a ``quarantine`` verdict keeps it
aside, out of memory, and charges the seller, until the operator releases it), ingests it
through the trust gate and sends the receipt; after a failed exchange it asks the chain
whether money moved, and it fetches a paid skill again (``redeliver``). :class:`node.market.purchase.buyer.Buyer` builds the purchase on it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from eth_account.signers.local import LocalAccount

from node.chain import ChainClient
from node.config import NodeConfig
from node.crystals import Crystal, now_ms
from node.market.book import ListingBook, StoredListing
from node.market.ledger import MarketLedger
from node.market.purchase.channels import ChannelChain, ChannelLedger
from node.market.purchase.errors import DEFINITIVE_REFUSALS, PurchaseError, PurchaseRefused
from node.market.purchase.payment_proof import settled_tx, transfer_problem
from node.market.purchase.skill_import import imported_skill, released_skill
from node.market.scan import scan_text
from node.market.states import PurchaseState
from node.memory import AsyncMemory
from node.net import PeerBusy, PeerUnreachable, ReqRespError, progress
from node.trust import GateDecision, TrustLevel
from protocol.channel import VoucherDelivery
from protocol.envelope import Envelope, seal
from protocol.identity import Identity, peer_id_from_public_key
from protocol.messages import Delivery, DeliveryRequest, ErrorReply, Message, Receipt

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
Request = Callable[[str, bytes, float], Awaitable[Envelope]]
Gate = Callable[[bytes], Awaitable[GateDecision]]


async def admit_all(seller_key: bytes) -> GateDecision:
    """The gate for a node without a trust layer (tests of the purchase flow alone)."""
    return GateDecision(True, TrustLevel.PROVISIONAL, "no trust layer configured")


class Receiver:
    """Talking to the seller and taking its delivery; the state both purchase and recovery use."""

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
        *,
        gate: Gate,
        on_outcome: Callable[[bytes, str, str], Awaitable[None]],
        on_fresh_listing: Callable[[Envelope], Awaitable[None]],
        spawn: Callable[[Callable[[], Awaitable[None]]], None] | None = None,
        channel_ledger: ChannelLedger | None = None,
        channel_chain: Callable[[], ChannelChain | None] = lambda: None,
    ) -> None:
        """``gate``: the trust gate at ingestion (``admit_all`` without a trust layer);
        ``on_outcome(seller key, event, detail)``: the trust ledger; ``on_fresh_listing``: a
        TermsChanged listing, validated and stored as if synced; ``spawn`` starts a task in
        the node's nursery (the receipt goes out in the background), None to send inline."""
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
        self.on_outcome = on_outcome
        self.on_fresh_listing = on_fresh_listing
        # Channels this node pays through (None: it pays with ``exact`` only).
        self.channel_ledger = channel_ledger
        self.channel_chain = channel_chain  # for deposits this node submits itself
        self._exact_only: dict[str, float] = {}  # pay-to -> until when it takes exact only
        self._channel_locks: dict[str, trio.Lock] = {}
        self._lock = trio.Lock()  # serialises cap checks with the purchase record
        self.spawn = spawn

    def _seal(self, message: Message) -> bytes:
        return seal(self.identity, message.KIND, message, self.next_seq(), now_ms())

    async def _exchange(self, peer: str, message: Message, expect: type[M], timeout_s: float) -> M:
        return expect_reply(await self._ask(peer, message, timeout_s), expect)

    async def _ask(self, peer: str, message: Message, timeout_s: float | None = None) -> Message:
        """Send one request; the seller's answer, whatever it is (refusals included)."""
        timeout_s = self.config.market.purchase_timeout_s if timeout_s is None else timeout_s
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
        return envelope.message()

    async def _outcome(self, seller_key: bytes, event: str, detail: str) -> None:
        await self.on_outcome(seller_key, event, detail)

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
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.PAID_UNDELIVERED,
                                  tx_hash=tx_hash, reason=str(error))
            error.money_moved = True
            error.args = (f"{error}. The payment settled in {tx_hash} but nothing was delivered; "
                          f"retry with `crystalmesh skill redeliver {listing_id}`",)
            return
        if isinstance(error, PurchaseRefused) and error.code in DEFINITIVE_REFUSALS:
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.REFUSED, reason=str(error))
            return
        await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.PENDING, reason=str(error))
        error.args = (f"{error}. The signed payment may still settle; `crystalmesh skill buy "
                      f"{listing_id}` again resends the same authorization (it can never be paid "
                      "twice) and collects the skill",)

    async def _settled_tx(self, nonce: bytes) -> str | None:
        return await settled_tx(self.chain(), self.wallet.address, nonce)

    async def _verify_transfer(self, tx_hash: str, pay_to: str, price: int) -> str | None:
        return await transfer_problem(self.chain(), tx_hash, self.wallet.address, pay_to, price)

    async def _accept(self, request_id: str, stored: StoredListing,
                      delivery: Delivery | VoucherDelivery, price: int) -> dict[str, Any]:
        """Take a delivery: an ``exact`` one once the chain shows its transfer, a voucher one
        as it is (the voucher is the payment, recorded on both sides before delivery)."""
        listing = stored.listing
        seller = peer_id_from_public_key(stored.seller_key)
        progress.step("verify")
        tx_hash = delivery.tx_hash if isinstance(delivery, Delivery) else None
        # Delivery.check() already verified sha256(payload) == delivery.content_hash.
        if delivery.content_hash != listing.content_hash or delivery.listing_id != listing.listing_id:
            problem = (await self._verify_transfer(delivery.tx_hash, listing.pay_to, price)
                       if isinstance(delivery, Delivery) else None)
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.TAMPERED,
                                  tx_hash=tx_hash,
                                  reason="delivered content does not match the listing's hash")
            await self._outcome(stored.seller_key, "delivery_tampered", "hash mismatch")
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=False)
            raise PurchaseError(
                "delivered skill does not match the listing's content hash; it was NOT ingested"
                + ("" if problem else f" (payment {tx_hash or 'voucher'} did settle)"),
                "tampered", money_moved=problem is None)
        problem = (await self._verify_transfer(delivery.tx_hash, listing.pay_to, price)
                   if isinstance(delivery, Delivery) else None)
        if problem:
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.FAILED,
                                  tx_hash=tx_hash, reason=problem)
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=False)
            raise PurchaseError(f"payment not verified on chain: {problem}", "unverified_payment")
        await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.PAID, tx_hash=tx_hash)
        scheme = {"scheme": "exact" if isinstance(delivery, Delivery) else "batch-settlement"}
        report = await trio.to_thread.run_sync(scan_text, delivery.payload)
        scanned = {"scan": report.to_dict()}
        if report.blocked:  # quarantined, or refused as unreadable: not into memory
            # Paid for and delivered intact, but poisoned: kept aside, out of memory, until released.
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.QUARANTINED,
                                  reason=f"scan: {report.summary()}"[:500], payload=delivery.payload)
            await self._outcome(stored.seller_key, "skill_quarantined", report.summary()[:200])
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=True)
            log.warning("bought skill quarantined listing=%s %s", listing.listing_id[:16], report.summary())
            return {"request_id": request_id, "listing_id": listing.listing_id,
                    "price_micro_usdc": price, "tx_hash": tx_hash, "crystal_id": None,
                    "seller_key": stored.seller_key.hex(), "content_hash": delivery.content_hash,
                    "ingested": False, "quarantined": True,
                    "not_ingested_because": f"quarantined by the skill scan: {report.summary()}"} | scanned | scheme
        decision = await self.gate(stored.seller_key)
        if not decision.admitted:
            # Paid for and delivered: the buyer keeps it. The gate only keeps it out of memory.
            await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.DELIVERED_NOT_INGESTED,
                                  reason=f"ingestion gate: {decision.reason}",
                                  payload=delivery.payload)
            await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=True)
            return {"request_id": request_id, "listing_id": listing.listing_id,
                    "price_micro_usdc": price, "tx_hash": tx_hash, "crystal_id": None,
                    "seller_key": stored.seller_key.hex(), "ingested": False,
                    "not_ingested_because": decision.reason, "payload": delivery.payload} | scanned | scheme
        progress.step("ingest")
        crystal = await self._ingest(stored, delivery)
        await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.COMPLETED,
                              crystal_id=crystal.id)
        await self._outcome(stored.seller_key, "delivered_ok", listing.listing_id)
        await self._send_receipt(seller, request_id, listing.listing_id, delivery, ok=True)
        return {
            "request_id": request_id,
            "listing_id": listing.listing_id,
            "price_micro_usdc": price,
            "tx_hash": tx_hash,
            "crystal_id": crystal.id,
            "seller_key": stored.seller_key.hex(),
            "content_hash": delivery.content_hash,
            "ingested": True,
        } | scanned | scheme

    async def _send_receipt(self, seller: str, request_id: str, listing_id: str,
                            delivery: Delivery | VoucherDelivery, ok: bool) -> None:
        """The buyer's verdict, for the seller's log. Nothing waits for it: with ``spawn`` (the
        node's nursery) it goes out in the background, so a purchase costs one round trip.
        A voucher delivery has no transaction to name: none is sent."""
        if not isinstance(delivery, Delivery):
            return
        receipt = Receipt(request_id=request_id, listing_id=listing_id, tx_hash=delivery.tx_hash,
                          content_hash=delivery.content_hash, ok=ok)
        data = self._seal(receipt)

        async def send() -> None:
            try:
                await self.request(seller, data, 5.0)
            except ReqRespError as error:
                log.info("receipt not delivered seller=%s error=%s", seller, error)

        if self.spawn is not None:
            self.spawn(send)
        else:
            await send()

    async def _ingest(self, stored: StoredListing, delivery: Delivery | VoucherDelivery) -> Crystal:
        existing = await self.memory.find_by_hash(delivery.content_hash)
        if existing is not None:
            return existing
        return await self.memory.add_prepared(
            imported_skill(stored, delivery, self.config.net.management_keys))

    async def redeliver(self, listing_id: str) -> dict[str, Any]:
        """Ask the seller again for a skill this node paid for but did not receive."""
        purchase = await self.memory.run(self.ledger.latest_purchase, listing_id)
        if purchase is None:
            raise PurchaseRefused(f"no purchase of {listing_id} recorded", "unknown_purchase")
        if purchase.state == PurchaseState.COMPLETED:
            raise PurchaseRefused(f"already received as crystal {purchase.crystal_id}", "completed")
        if purchase.state == PurchaseState.QUARANTINED:
            raise PurchaseRefused(f"received and quarantined ({purchase.reason}); "
                                  f"`crystalmesh skill release {listing_id}` takes it in", "quarantined")
        if purchase.state == PurchaseState.DELIVERED_NOT_INGESTED and purchase.payload is not None:
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

    async def release(self, listing_id: str) -> dict[str, Any]:
        """Take a quarantined skill into memory after all: the operator's explicit decision."""
        purchase = await self.memory.run(self.ledger.latest_purchase, listing_id)
        if purchase is None or purchase.state != PurchaseState.QUARANTINED or purchase.payload is None:
            raise PurchaseRefused(f"no quarantined purchase of {listing_id}", "not_quarantined")
        stored = await self.memory.run(self.listings.get, purchase.listing_id)
        crystal = await self.memory.add_prepared(released_skill(
            purchase.payload, purchase.seller_key, purchase.listing_id, purchase.tx_hash, stored))
        await self.memory.run(self.ledger.update_purchase, purchase.request_id, PurchaseState.COMPLETED,
                              crystal_id=crystal.id, reason=f"released from quarantine ({purchase.reason})"[:500])
        log.warning("quarantined skill released listing=%s crystal=%s", listing_id[:16], crystal.id)
        return {"listing_id": purchase.listing_id, "crystal_id": crystal.id, "released": True,
                "was": purchase.reason}


def expect_reply(reply: Message, expect: type[M]) -> M:
    """``reply`` if it is an ``expect``; a refusal raises ``PurchaseRefused``, anything else
    ``PurchaseError("protocol")``."""
    if isinstance(reply, ErrorReply):
        raise PurchaseRefused(f"seller refused: {reply.code}: {reply.message}", reply.code)
    if not isinstance(reply, expect):
        raise PurchaseError(f"seller answered {reply.KIND}, expected {expect.KIND}", "protocol")
    return reply
