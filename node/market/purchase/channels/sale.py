"""Seller side of a voucher purchase (``protocol.channel``): check, record, deliver at once.

    VoucherPurchaseRequest → price differs from the listing now → TermsChanged (nothing recorded)
                           → deposit carried → submitted on chain, channel re-read
                           → channel terms not ours / signature not the payer's / channel
                             withdrawing → ErrorReply(payment_invalid, "<reason>: …")
                           → total ≠ recorded total + price, or above the deposit →
                             ChannelState (our record: the buyer can sign again or deposit)
                           → recorded (sale + channel total, one compare-and-set transaction)
                             → VoucherDelivery

The voucher check is x402's receiver-side check (``terms``: one ECDSA recover, no chain
call); the channel's balance, claimed total and withdrawal come from the chain at most once per
``market.channel_state_ttl_s`` (and on a deposit), never per purchase. A request id already
recorded with the same voucher is delivered again (the buyer lost the answer), never charged
twice. Nothing is delivered before the voucher is durably recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from node import metrics
from node.crystals import now_ms
from node.market.book import StoredListing
from node.market.ledger import Sale
from node.market.purchase.channels.chain import ChannelChain, ClaimEntry, OnChainChannel
from node.market.purchase.channels.ledger import ChannelLedger, SellerChannel
from node.market.purchase.channels.terms import (
    SCHEME_VOUCHER,
    deposit_expired,
    deposit_payload,
    requirements,
    sdk_config,
    terms_problem,
    voucher_signed,
)
from node.market.purchase.errors import Refusal
from node.market.states import SaleState
from protocol.channel import (
    ChannelRefunded,
    ChannelState,
    RefundRequest,
    VoucherDelivery,
    VoucherPurchaseRequest,
)
from protocol.envelope import Envelope
from protocol.messages import Message, TermsChanged
from protocol.purchase import (
    ERROR_BAD_REQUEST,
    ERROR_PAYMENT_INVALID,
    ERROR_SCHEME_UNSUPPORTED,
    ERROR_SETTLEMENT_FAILED,
    content_hash,
)

log = logging.getLogger(__name__)

# Refusal reasons (the first word of the ErrorReply message, for buyers and tests).
FORGED = "voucher_forged"
WRONG_CHANNEL = "voucher_wrong_channel"
WITHDRAWING = "channel_withdrawing"
NON_INCREASING = "voucher_non_increasing"
OVER_DEPOSIT = "voucher_over_deposit"
BASE_MISMATCH = "voucher_base_mismatch"
SMALL_DEPOSIT = "deposit_below_minimum"


class VoucherSelling:
    """Mixed into :class:`node.market.purchase.seller.Seller` (its listing checks and replies)."""

    channels: Callable[[], ChannelChain | None]
    channel_ledger: ChannelLedger | None
    channel_state_ttl_s: float
    channel_min_deposit_micro_usdc: int
    chain_id: int
    token_address: str
    pay_to: str

    # provided by Seller
    def _seal(self, message: Message) -> bytes: raise NotImplementedError
    def _error(self, request_id: str, code: str, message: str) -> bytes: raise NotImplementedError
    async def _sellable(self, listing_id: str) -> tuple[StoredListing, Any] | Refusal:
        raise NotImplementedError
    memory: Any
    on_sale: Any

    async def _sell_voucher(self, envelope: Envelope, message: VoucherPurchaseRequest) -> bytes:
        request_id = message.request_id
        chain = self.channels()
        ledger = self.channel_ledger
        if chain is None or ledger is None or not await trio.to_thread.run_sync(chain.available):
            return self._error(request_id, ERROR_SCHEME_UNSUPPORTED,
                               "this seller takes exact payments only (no channel contract)")
        found = await self._sellable(message.listing_id)
        if isinstance(found, Refusal):
            return self._error(request_id, found.code, found.message)
        stored, crystal = found
        listing = stored.listing
        channel_hex = "0x" + message.channel_id.hex()
        problem = terms_problem(message.channel, message.channel_id, self.pay_to,
                                listing.token_address, listing.chain_id)
        if problem:
            return self._refuse(request_id, WRONG_CHANNEL, problem)
        if not voucher_signed(message.channel, message.channel_id, message.max_claimable,
                              message.signature, listing.chain_id):
            return self._refuse(request_id, FORGED,
                                "the signature is not the channel payer's voucher for this total")
        existing = await self.memory.run(ledger.voucher_sale, request_id)
        if existing is not None:
            if (existing.scheme, existing.channel_id, existing.voucher_total, existing.buyer_key) != (
                    SCHEME_VOUCHER, channel_hex, message.max_claimable, envelope.sender.hex()):
                return self._error(request_id, ERROR_BAD_REQUEST,
                                   "request id already used for another purchase")
            log.info("voucher purchase resent, delivering again request=%s", request_id)
            channel = await self.memory.run(ledger.seller_channel, channel_hex)
            reply = self._voucher_delivery(message, stored, crystal.text, channel, None)
            if existing.state == SaleState.VOUCHED:  # recorded, then the answer was lost
                await self.memory.run(self.ledger.update_sale, request_id, SaleState.DELIVERED)
            return reply
        if (message.price_micro_usdc != listing.price_micro_usdc
                or message.channel.receiver.lower() != listing.pay_to.lower()):
            return self._seal(TermsChanged(
                request_id=request_id, listing_id=listing.listing_id, listing=stored.envelope,
                message=(f"the listing asks {listing.price_micro_usdc} micro-USDC to "
                         f"{listing.pay_to}; your voucher was not recorded")))
        deposit_tx: str | None = None
        if message.deposit is not None and message.deposit.value < max(
                self.channel_min_deposit_micro_usdc, message.price_micro_usdc):
            return self._refuse(request_id, SMALL_DEPOSIT,
                                f"this seller takes deposits of at least "
                                f"{max(self.channel_min_deposit_micro_usdc, message.price_micro_usdc)}"
                                " micro-USDC")
        try:
            channel = await self._channel_now(chain, ledger, message, envelope.sender.hex(),
                                              force=message.deposit is not None)
            if message.deposit is not None:
                deposit_tx, channel = await self._deposit(chain, ledger, message, envelope, channel)
        except _ChainTrouble as trouble:
            return self._error(request_id, ERROR_SETTLEMENT_FAILED, str(trouble))
        if channel.withdraw_requested_at_s:
            return self._refuse(request_id, WITHDRAWING,
                                "the payer has asked for its deposit back: no more vouchers")
        base = channel.charged_total
        if message.max_claimable <= base:
            return self._state(message, channel, "base", f"{NON_INCREASING}: total "
                               f"{message.max_claimable} is not above the recorded {base}")
        if message.max_claimable != base + message.price_micro_usdc:
            return self._state(message, channel, "base", f"{BASE_MISMATCH}: expected total "
                               f"{base + message.price_micro_usdc} (recorded {base} + price)")
        if message.max_claimable > channel.balance:
            return self._state(message, channel, "deposit", f"{OVER_DEPOSIT}: total "
                               f"{message.max_claimable} is above the deposit {channel.balance}")
        created = now_ms()
        sale = Sale(
            request_id=request_id, listing_id=listing.listing_id, crystal_id=crystal.id,
            stable_skill_id=listing.stable_skill_id, buyer_key=envelope.sender.hex(),
            buyer_address=message.channel.payer, price_micro_usdc=listing.price_micro_usdc,
            auth_nonce=None, state=SaleState.VOUCHED, tx_hash=None, reason=None,
            created_at_ms=created, updated_at_ms=created, scheme=SCHEME_VOUCHER,
            channel_id=channel_hex, voucher_total=message.max_claimable)
        recorded = await self.memory.run(ledger.record_voucher_sale, sale, base,
                                         "0x" + message.signature.hex())
        if not recorded:  # another voucher on this channel was recorded meanwhile
            now = await self.memory.run(ledger.seller_channel, channel_hex)
            assert now is not None
            return self._state(message, now, "base",
                               f"{BASE_MISMATCH}: the channel moved on while this was checked")
        metrics.VOUCHERS.labels(outcome="recorded").inc()
        after = await self.memory.run(ledger.seller_channel, channel_hex)
        reply = self._voucher_delivery(message, stored, crystal.text, after, deposit_tx)
        await self.memory.run(self.ledger.update_sale, request_id, SaleState.DELIVERED)
        if self.on_sale:
            await self.on_sale(sale)
        return reply

    ledger: Any

    async def _refund_channel(self, envelope: Envelope, message: RefundRequest) -> bytes:
        """Cooperative refund: claim what the vouchers owe, return the rest to the payer, in
        one transaction; only for the peer that pays through the channel."""
        request_id = message.request_id
        chain = self.channels()
        ledger = self.channel_ledger
        if chain is None or ledger is None or not await trio.to_thread.run_sync(chain.available):
            return self._error(request_id, ERROR_SCHEME_UNSUPPORTED, "this seller has no channels")
        problem = terms_problem(message.channel, message.channel_id, self.pay_to,
                                self.token_address, self.chain_id)
        if problem:
            return self._refuse(request_id, WRONG_CHANNEL, problem)
        if not voucher_signed(message.channel, message.channel_id, message.max_claimable,
                              message.signature, self.chain_id):
            return self._refuse(request_id, FORGED, "the refund voucher is not the payer's")
        channel_hex = "0x" + message.channel_id.hex()
        channel = await self.memory.run(ledger.seller_channel, channel_hex)
        if channel is not None and channel.charged_total > 0 and \
                channel.buyer_key != envelope.sender.hex():
            return self._refuse(request_id, WRONG_CHANNEL, "only the channel's payer may close it")
        if channel is not None and channel.voucher_signature and \
                channel.charged_total >= message.max_claimable:
            total, signature = channel.charged_total, channel.voucher_signature
        else:
            total, signature = message.max_claimable, "0x" + message.signature.hex()
        entry = ClaimEntry(channel_id=channel_hex, config=sdk_config(message.channel).to_dict(),
                           total=total, signature=signature)
        try:
            outcome, refunded = await trio.to_thread.run_sync(chain.refund, entry)
        except Exception as error:
            log.info("channel refund failed channel=%s error=%s", channel_hex[:18], error)
            return self._error(request_id, ERROR_SETTLEMENT_FAILED, f"refund failed: {error}"[:280])
        state = await _read(chain, channel_hex)
        await self.memory.run(ledger.synced, channel_hex, message.channel, envelope.sender.hex(),
                              state.balance, state.total_claimed, state.withdraw_requested_at_s)
        await self.memory.run(ledger.seller_channel_closed, channel_hex)
        metrics.CHANNEL_CLAIM_GAS.inc(outcome.gas_used)
        return self._seal(ChannelRefunded(
            request_id=request_id, channel_id=message.channel_id,
            claimed_total=state.total_claimed, refunded=refunded, tx_hash=outcome.tx_hash))

    def _refuse(self, request_id: str, reason: str, detail: str) -> bytes:
        metrics.VOUCHERS.labels(outcome=reason).inc()
        log.info("voucher refused request=%s reason=%s %s", request_id, reason, detail)
        return self._error(request_id, ERROR_PAYMENT_INVALID, f"{reason}: {detail}")

    def _state(self, message: VoucherPurchaseRequest, channel: SellerChannel, reason: str,
               detail: str) -> bytes:
        metrics.VOUCHERS.labels(outcome=detail.split(":", 1)[0]).inc()
        signature = channel.voucher_signature
        return self._seal(ChannelState(
            request_id=message.request_id, channel_id=message.channel_id, reason=reason,
            charged_total=channel.charged_total,
            voucher_total=channel.charged_total if signature else 0,
            voucher_signature=bytes.fromhex(signature[2:]) if signature else None,
            balance=channel.balance, withdraw_requested_at_s=channel.withdraw_requested_at_s,
            message=detail[:280]))

    def _voucher_delivery(self, message: VoucherPurchaseRequest, stored: StoredListing,
                          payload: str, channel: SellerChannel | None,
                          deposit_tx: str | None) -> bytes:
        return self._seal(VoucherDelivery(
            request_id=message.request_id, listing_id=stored.listing.listing_id, payload=payload,
            content_hash=content_hash(payload), channel_id=message.channel_id,
            charged_total=message.max_claimable,
            balance=channel.balance if channel is not None else 0, deposit_tx=deposit_tx))

    async def _channel_now(self, chain: ChannelChain, ledger: ChannelLedger,
                           message: VoucherPurchaseRequest, buyer_key: str,
                           force: bool = False) -> SellerChannel:
        """Our record of the channel, its chain part re-read if older than the TTL."""
        channel_hex = "0x" + message.channel_id.hex()
        channel = await self.memory.run(ledger.seller_channel, channel_hex)
        fresh = channel is not None and (
            now_ms() - channel.synced_at_ms <= self.channel_state_ttl_s * 1000)
        if fresh and not force:
            assert channel is not None
            return channel
        state = await _read(chain, channel_hex)
        return await self.memory.run(ledger.synced, channel_hex, message.channel, buyer_key,
                                     state.balance, state.total_claimed,
                                     state.withdraw_requested_at_s)

    async def _deposit(self, chain: ChannelChain, ledger: ChannelLedger,
                       message: VoucherPurchaseRequest, envelope: Envelope,
                       channel: SellerChannel) -> tuple[str | None, SellerChannel]:
        """Submit the buyer's deposit (we pay the gas, as an x402 facilitator does). One that
        fails because it already happened (a resent request after a crash) is fine: the
        channel is re-read and the voucher checked against what the chain holds."""
        deposit = message.deposit
        assert deposit is not None
        if channel.balance >= message.max_claimable and channel.balance >= deposit.value:
            return None, channel  # already deposited (the request is a resend)
        if deposit_expired(deposit):
            return None, channel
        payload = deposit_payload(message.channel, message.channel_id, deposit,
                                  message.max_claimable, message.signature)
        checked = requirements(message.channel.receiver, message.channel.token, self.chain_id,
                               message.price_micro_usdc, message.channel.withdraw_delay_s)
        tx_hash: str | None = None
        try:
            tx_hash = await trio.to_thread.run_sync(chain.deposit, payload,
                                                    checked.model_dump(by_alias=True))
            metrics.CHANNEL_DEPOSITS.labels(outcome="ok").inc()
        except Exception as error:  # a refused or failed deposit: the chain decides below
            metrics.CHANNEL_DEPOSITS.labels(outcome="failed").inc()
            log.info("channel deposit not submitted channel=%s error=%s",
                     message.channel_id.hex()[:16], error)
        return tx_hash, await self._channel_now(chain, ledger, message, envelope.sender.hex(),
                                                force=True)


class _ChainTrouble(Exception):
    pass


async def _read(chain: ChannelChain, channel_hex: str) -> OnChainChannel:
    try:
        return await trio.to_thread.run_sync(chain.channel, channel_hex)
    except Exception as error:
        raise _ChainTrouble(f"cannot read the channel from the chain: {error}"[:200]) from error
