"""Buyer side of a voucher purchase (``protocol.channel``), mixed into ``Buyer``.

One channel per seller (its pay-to and token): the first purchase opens it, carrying a
deposit of ``market.channel_deposit_micro_usdc`` (at least the price; shown in the result and
by the CLI before it is signed), later ones carry only a voucher for the channel's new total.
The purchase and the voucher are recorded (``ledger``) before the request leaves the
node; the buyer's exposure is the highest voucher it ever signed.

Answers: ``VoucherDelivery`` → taken like any delivery (hash, scan, gate, ingest);
``ChannelState`` → the seller's record differs: if its newest voucher is our own signature we
take its total as the base and sign once more (or top up the deposit once); ``ErrorReply``
``unknown_kind`` / ``scheme_unsupported`` → the seller takes ``exact`` only (remembered; the
caller pays with ``exact``). No answer → ``pending``: ``buy`` again resends the same voucher,
which the seller records once or delivers again, never charges twice.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from node.crystals import now_ms
from node.market.book import StoredListing
from node.market.ledger import Purchase
from node.market.purchase.channels.chain import ChannelChain
from node.market.purchase.channels.ledger import BuyerChannel, ChannelLedger
from node.market.purchase.channels.terms import (
    SCHEME_VOUCHER,
    buyer_terms,
    channel_id,
    deposit_expired,
    deposit_payload,
    requirements,
    sdk_config,
    sign_deposit,
    sign_voucher,
    voucher_signed,
)
from node.market.purchase.errors import PurchaseError, PurchaseRefused
from node.market.states import ChannelStatus, PurchaseState
from protocol.channel import (
    ChannelDeposit,
    ChannelRefunded,
    ChannelState,
    RefundRequest,
    VoucherDelivery,
    VoucherPurchaseRequest,
)
from protocol.envelope import REASON_UNKNOWN_KIND
from protocol.identity import peer_id_from_public_key
from protocol.messages import ErrorReply, Message, TermsChanged
from protocol.purchase import ERROR_BAD_REQUEST, ERROR_SCHEME_UNSUPPORTED, new_request_id

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from node.config import NodeConfig

log = logging.getLogger(__name__)

# How long a seller that answered "exact only" is paid with exact without asking again.
EXACT_ONLY_MEMORY_S = 3_600.0


class ExactOnly(Exception):
    """The seller does not take vouchers: pay with ``exact``."""


class VoucherBuying:
    """The voucher half of ``Buyer`` (uses its config, wallet, ledgers and exchange)."""

    config: NodeConfig
    wallet: LocalAccount
    listings: Any
    channel_chain: Callable[[], ChannelChain | None]
    memory: Any
    ledger: Any
    channel_ledger: ChannelLedger | None
    _exact_only: dict[str, float]
    _channel_locks: dict[str, trio.Lock]

    if TYPE_CHECKING:  # provided by Receiver / Buyer
        async def _ask(self, peer: str, message: Message,
                       timeout_s: float | None = None) -> Message: ...

        async def _accept(self, request_id: str, stored: StoredListing, delivery: Any,
                          price: int) -> dict[str, Any]: ...

        async def _check_caps(self, price: int, max_price: int | None) -> None: ...

    def takes_vouchers(self, stored: StoredListing) -> bool:
        """Pay this seller with a voucher? Not if vouchers are off or it said exact only."""
        if not self.config.market.vouchers or self.channel_ledger is None:
            return False
        until = self._exact_only.get(stored.listing.pay_to.lower(), 0.0)
        return until <= time.monotonic()

    async def channels(self) -> list[dict[str, Any]]:
        assert self.channel_ledger is not None
        return [channel.to_dict() for channel in
                await self.memory.run(self.channel_ledger.buyer_channels)]

    _lock: trio.Lock

    async def _buy_with_voucher(self, request_id: str, stored: StoredListing,
                                max_price: int | None) -> dict[str, Any]:
        """The whole voucher purchase; raises ``ExactOnly`` when the seller takes none."""
        listing = stored.listing
        ledger = self.channel_ledger
        assert ledger is not None
        lock = self._channel_locks.setdefault(listing.pay_to.lower(), trio.Lock())
        async with lock:  # one voucher in flight per channel: each is built on the last
            channel = await self._channel_for(stored)
            if channel.state == ChannelStatus.WITHDRAWING:
                # The seller takes no voucher on a channel being withdrawn (``wallet withdraw``).
                raise ExactOnly("our channel to this seller is being withdrawn")
            async with self._lock:  # caps and the record together, as for exact
                await self._check_caps(listing.price_micro_usdc, max_price)
                deposit, total, signature = self._voucher_for(channel, listing.price_micro_usdc)
                created = now_ms()
                await self.memory.run(ledger.record_voucher_purchase, Purchase(
                    request_id=request_id, listing_id=listing.listing_id,
                    seller_key=stored.seller_key.hex(), name=listing.name,
                    price_micro_usdc=listing.price_micro_usdc, pay_to=listing.pay_to,
                    auth_nonce=None, state=PurchaseState.AUTHORIZED, tx_hash=None,
                    crystal_id=None, reason=None, created_at_ms=created, updated_at_ms=created,
                    scheme=SCHEME_VOUCHER, channel_id=channel.channel_id, voucher_total=total,
                    voucher_signature="0x" + signature.hex(),
                ), _deposit_json(deposit))
            return await self._send_voucher(request_id, stored, channel, deposit, total, signature)

    async def _resume_voucher(self, previous: Purchase, stored: StoredListing) -> dict[str, Any]:
        """A voucher purchase sent and unanswered: send the same voucher again (the seller
        records it once, or delivers what it recorded)."""
        ledger = self.channel_ledger
        assert ledger is not None and previous.channel_id is not None
        assert previous.voucher_total is not None and previous.voucher_signature is not None
        channel = await self.memory.run(ledger.buyer_channel_by_id, previous.channel_id)
        if channel is None:
            raise PurchaseRefused("the channel of that purchase is no longer known", "unknown_channel")
        lock = self._channel_locks.setdefault(stored.listing.pay_to.lower(), trio.Lock())
        async with lock:
            log.info("resending the voucher of purchase %s", previous.request_id)
            return await self._send_voucher(
                previous.request_id, stored, channel,
                _deposit_from_json(channel.pending_deposit_json), previous.voucher_total,
                bytes.fromhex(previous.voucher_signature[2:]))

    async def _channel_for(self, stored: StoredListing) -> BuyerChannel:
        listing = stored.listing
        ledger = self.channel_ledger
        assert ledger is not None
        channel = await self.memory.run(ledger.buyer_channel, listing.pay_to, listing.token_address)
        if channel is None:
            terms = buyer_terms(self.wallet.address, listing.pay_to, listing.token_address,
                                self.config.market.channel_withdraw_delay_s)
            identifier = "0x" + channel_id(terms, listing.chain_id).hex()
            await self.memory.run(ledger.open_buyer_channel, identifier, stored.seller_key.hex(),
                                  terms)
            channel = await self.memory.run(ledger.buyer_channel_by_id, identifier)
            assert channel is not None
        return channel

    def _deposit_amount(self, channel: BuyerChannel, price: int) -> int:
        """``channel_deposit_micro_usdc``, never more than a day's spending cap (a buyer with a
        small budget does not lock more at one seller than it may spend in a day), and at least
        the price."""
        market = self.config.market
        return max(price, min(market.channel_deposit_micro_usdc, market.max_per_day_micro_usdc))

    def _voucher_for(self, channel: BuyerChannel, price: int
                     ) -> tuple[ChannelDeposit | None, int, bytes]:
        """The voucher for one more purchase on ``channel`` and, if the deposit does not cover
        it, a deposit (a pending one resent while still valid, else a fresh one)."""
        total = channel.charged_total + price
        chain_id = self.config.chain.chain_id
        if total <= channel.deposited_micro_usdc:
            return None, total, sign_voucher(self.wallet, channel.terms, total, chain_id)
        pending = _deposit_from_json(channel.pending_deposit_json)
        if pending is not None and not deposit_expired(pending):
            return pending, total, sign_voucher(self.wallet, channel.terms, total, chain_id)
        deposit, signature = sign_deposit(self.wallet, channel.terms, chain_id, price,
                                          self._deposit_amount(channel, price), total)
        return deposit, total, signature

    async def _send_voucher(self, request_id: str, stored: StoredListing, channel: BuyerChannel,
                            deposit: ChannelDeposit | None, total: int,
                            signature: bytes) -> dict[str, Any]:
        ledger = self.channel_ledger
        assert ledger is not None
        listing = stored.listing
        seller = peer_id_from_public_key(stored.seller_key)
        price = listing.price_micro_usdc
        terms = channel.terms
        identifier = bytes.fromhex(channel.channel_id[2:])
        for attempt in range(3):  # the voucher, then at most a rebase and a top-up
            request = VoucherPurchaseRequest(
                request_id=request_id, listing_id=listing.listing_id, price_micro_usdc=price,
                channel=terms, channel_id=identifier, max_claimable=total, signature=signature,
                deposit=deposit)
            try:
                reply = await self._ask(seller, request)
            except PurchaseError as error:
                await self.memory.run(self.ledger.update_purchase, request_id,
                                      PurchaseState.PENDING, reason=str(error))
                error.args = (f"{error}. The voucher may have been recorded; `crystalmesh skill "
                              f"buy {listing.listing_id}` again resends it (it is never charged "
                              "twice) and collects the skill",)
                raise
            if isinstance(reply, VoucherDelivery):
                if reply.channel_id != identifier or reply.charged_total != total:
                    await self._voucher_refused(request_id, "the seller's delivery names another "
                                                "channel or total")
                    raise PurchaseError("the seller's voucher delivery does not match the voucher",
                                        "protocol")
                # The seller's balance is only a hint for when to top up: a wrong one costs at
                # most one ChannelState round trip, never money.
                deposited = reply.balance if deposit is not None else None
                await self.memory.run(ledger.seller_acknowledged, channel.channel_id, total,
                                      deposited)
                result = await self._accept(request_id, stored, reply, price)
                return result | {"scheme": SCHEME_VOUCHER, "channel_id": channel.channel_id,
                                 "channel_total_micro_usdc": total,
                                 "deposit_micro_usdc": deposit.value if deposit else 0,
                                 "deposit_tx": reply.deposit_tx}
            if isinstance(reply, ChannelState) and attempt < 2:
                rebased = await self._take_channel_state(channel, reply, price)
                if rebased is None:
                    break
                channel, deposit = rebased
                total = channel.charged_total + price
                signature = sign_voucher(self.wallet, channel.terms, total, self.config.chain.chain_id)
                await self.memory.run(ledger.resign_voucher_purchase, request_id,
                                      channel.channel_id, total, "0x" + signature.hex())
                continue
            if isinstance(reply, ErrorReply) and (
                    reply.code == ERROR_SCHEME_UNSUPPORTED
                    or (reply.code == ERROR_BAD_REQUEST and reply.message == REASON_UNKNOWN_KIND)):
                self._exact_only[listing.pay_to.lower()] = time.monotonic() + EXACT_ONLY_MEMORY_S
                await self._voucher_refused(request_id, "the seller takes exact payments only")
                await self.memory.run(ledger.drop_pending_deposit, channel.channel_id)
                raise ExactOnly(reply.message)
            if isinstance(reply, TermsChanged):
                await self._voucher_refused(request_id, "the seller re-priced the listing")
                raise PurchaseRefused("the seller changed its price; nothing was charged (buy "
                                      "again to see the new price)", "terms_changed")
            detail = (f"{reply.code}: {reply.message}" if isinstance(reply, ErrorReply)
                      else f"{reply.KIND}: {getattr(reply, 'message', '')}")
            await self._voucher_refused(request_id, detail)
            if deposit is not None:  # refused with it: the next purchase signs a fresh one
                await self.memory.run(ledger.drop_pending_deposit, channel.channel_id)
            raise PurchaseRefused(f"seller refused the voucher: {detail}",
                                  reply.code if isinstance(reply, ErrorReply) else "voucher_refused")
        await self._voucher_refused(request_id, "the seller's channel record could not be agreed")
        raise PurchaseRefused("the seller's record of the channel could not be agreed on; nothing "
                              "was charged", "voucher_refused")

    async def _take_channel_state(self, channel: BuyerChannel, state: ChannelState,
                                  price: int) -> tuple[BuyerChannel, ChannelDeposit | None] | None:
        """The seller's record, if we can build on it: its newest voucher must be our own
        signature (anything else it says about what we owe is not evidence)."""
        ledger = self.channel_ledger
        assert ledger is not None
        identifier = bytes.fromhex(channel.channel_id[2:])
        chain_id = self.config.chain.chain_id
        if state.charged_total > 0 and (
                state.voucher_signature is None or state.voucher_total != state.charged_total
                or not voucher_signed(channel.terms, identifier, state.voucher_total,
                                      state.voucher_signature, chain_id)):
            log.warning("seller's channel state is not backed by our voucher channel=%s",
                        channel.channel_id[:18])
            return None
        if state.charged_total > channel.signed_total:
            log.warning("seller holds a voucher above what we recorded channel=%s total=%d",
                        channel.channel_id[:18], state.charged_total)
        deposit: ChannelDeposit | None = None
        confirmed = state.balance if state.balance >= channel.deposited_micro_usdc else None
        await self.memory.run(ledger.rebase, channel.channel_id, state.charged_total, confirmed)
        channel = await self.memory.run(ledger.buyer_channel_by_id, channel.channel_id)
        assert channel is not None
        if state.reason == "deposit" or state.charged_total + price > state.balance:
            deposit, _ = sign_deposit(self.wallet, channel.terms, chain_id, price,
                                      self._deposit_amount(channel, price),
                                      state.charged_total + price)
            await self.memory.run(ledger.record_pending_deposit, channel.channel_id,
                                  _deposit_json(deposit))
        return channel, deposit

    async def refund(self, channel_id: str) -> dict[str, Any]:
        """Close a channel cooperatively: the seller claims what our vouchers owe and returns
        the rest of the deposit to our wallet, in one transaction it pays for."""
        ledger = self.channel_ledger
        if ledger is None:
            raise PurchaseRefused("this node has no payment channels", "no_channels")
        channel = await self.memory.run(ledger.buyer_channel_by_id, channel_id.lower())
        if channel is None:
            raise PurchaseRefused(f"no channel {channel_id} (see `crystalmesh wallet channels`)",
                                  "unknown_channel")
        if channel.state == ChannelStatus.CLOSED:
            raise PurchaseRefused(f"channel {channel_id[:18]} is already closed ({channel.refund_tx})",
                                  "closed")
        lock = self._channel_locks.setdefault(channel.receiver.lower(), trio.Lock())
        async with lock:
            settled = await self._refunded_on_chain(channel)
            if settled is not None:
                return settled
            await self.memory.run(ledger.buyer_channel_state, channel.channel_id,
                                  ChannelStatus.REFUNDING)
            # Our voucher for what we were charged: x402's zero-charge refund voucher.
            total = max(channel.charged_total, channel.signed_total)
            signature = sign_voucher(self.wallet, channel.terms, total, self.config.chain.chain_id)
            reply = await self._ask(peer_id_from_public_key(bytes.fromhex(channel.seller_key)),
                                    RefundRequest(request_id=new_request_id(), channel=channel.terms,
                                                  channel_id=bytes.fromhex(channel.channel_id[2:]),
                                                  max_claimable=total, signature=signature))
            if not isinstance(reply, ChannelRefunded):
                await self.memory.run(ledger.buyer_channel_state, channel.channel_id,
                                      ChannelStatus.OPEN)
                detail = (f"{reply.code}: {reply.message}" if isinstance(reply, ErrorReply)
                          else reply.KIND)
                raise PurchaseRefused(f"the seller did not refund: {detail}", "refund_refused")
            await self.memory.run(ledger.rebase, channel.channel_id, reply.claimed_total, None)
            await self.memory.run(ledger.buyer_channel_state, channel.channel_id,
                                  ChannelStatus.CLOSED, reply.tx_hash, reply.refunded)
        log.info("channel refunded channel=%s refunded=%d tx=%s", channel.channel_id[:18],
                 reply.refunded, reply.tx_hash)
        return {"channel_id": channel.channel_id, "spent_micro_usdc": reply.claimed_total,
                "refunded_micro_usdc": reply.refunded, "tx_hash": reply.tx_hash}

    async def _refunded_on_chain(self, channel: BuyerChannel) -> dict[str, Any] | None:
        """A refund asked before (the answer lost: a crash on either side) may have happened:
        the chain says so when nothing of a funded channel is left unclaimed."""
        chain = self.channel_chain()
        ledger = self.channel_ledger
        if chain is None or ledger is None or channel.state != ChannelStatus.REFUNDING:
            return None
        try:
            state = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
        except Exception as error:
            log.info("channel state unreadable, asking the seller channel=%s error=%s",
                     channel.channel_id[:18], error)
            return None
        if state.balance == 0 or state.balance > state.total_claimed:
            return None
        refunded = max(0, channel.deposited_micro_usdc - state.balance)
        await self.memory.run(ledger.rebase, channel.channel_id, state.total_claimed, None)
        await self.memory.run(ledger.buyer_channel_state, channel.channel_id,
                              ChannelStatus.CLOSED, None, refunded)
        return {"channel_id": channel.channel_id, "spent_micro_usdc": state.total_claimed,
                "refunded_micro_usdc": refunded, "tx_hash": None}

    async def withdraw(self, channel_id: str) -> dict[str, Any]:
        """The payer's way out without the seller (``wallet withdraw``): the first call starts
        the contract's timed withdrawal of the unclaimed deposit, a call after the channel's
        ``withdraw_delay_s`` completes it. Meanwhile the seller sees the withdrawal and claims
        what our vouchers owe it (the contract returns only what is still unclaimed). This
        node sends both transactions and pays their gas."""
        ledger = self.channel_ledger
        chain = self.channel_chain()
        if ledger is None or chain is None:
            raise PurchaseRefused("this node has no payment channels", "no_channels")
        channel = await self.memory.run(ledger.buyer_channel_by_id, channel_id.lower())
        if channel is None:
            raise PurchaseRefused(f"no channel {channel_id} (see `crystalmesh wallet channels`)",
                                  "unknown_channel")
        if channel.state in (ChannelStatus.CLOSED, ChannelStatus.REFUNDING):
            raise PurchaseRefused(f"channel {channel_id[:18]} is {channel.state}", str(channel.state))
        config = sdk_config(channel.terms).to_dict()
        lock = self._channel_locks.setdefault(channel.receiver.lower(), trio.Lock())
        async with lock:  # no voucher is signed on a channel while it is being withdrawn
            state = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
            if not state.withdraw_requested_at_s:
                unclaimed = state.balance - state.total_claimed
                if unclaimed <= 0:
                    raise PurchaseRefused("nothing of this channel's deposit is unclaimed",
                                          "nothing_to_withdraw")
                tx_hash = await self._withdraw_step(chain.initiate_withdraw, config, unclaimed)
                state = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
                await self.memory.run(ledger.buyer_withdraw, channel.channel_id,
                                      ChannelStatus.WITHDRAWING, state.withdraw_requested_at_s,
                                      state.withdraw_amount)
                started = await self.memory.run(ledger.buyer_channel_by_id, channel.channel_id)
                log.info("channel withdrawal started channel=%s amount=%d", channel.channel_id[:18],
                         state.withdraw_amount)
                return {"channel_id": channel.channel_id, "step": "initiated", "tx_hash": tx_hash,
                        "withdraw_micro_usdc": state.withdraw_amount,
                        "withdraw_requested_at_s": state.withdraw_requested_at_s,
                        "withdraw_finalize_after_s": started.withdraw_finalize_after_s}
            finalize_after = state.withdraw_requested_at_s + channel.terms.withdraw_delay_s
            try:
                tx_hash = await self._withdraw_step(chain.finalize_withdraw, config)
            except PurchaseError as error:
                raise PurchaseRefused(
                    f"the withdrawal can be finalized after {finalize_after} (unix seconds, the "
                    f"chain's clock; {error})", "withdraw_pending") from error
            after = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
            withdrawn = max(0, state.balance - after.balance)
            await self.memory.run(ledger.rebase, channel.channel_id, after.total_claimed, None)
            await self.memory.run(ledger.buyer_withdraw, channel.channel_id, ChannelStatus.CLOSED,
                                  0, 0, after.balance, withdrawn)
        log.info("channel withdrawn channel=%s withdrawn=%d", channel.channel_id[:18], withdrawn)
        return {"channel_id": channel.channel_id, "step": "finalized", "tx_hash": tx_hash,
                "withdrawn_micro_usdc": withdrawn, "spent_micro_usdc": after.total_claimed}

    async def _withdraw_step(self, step: Callable[..., str], *args: Any) -> str:
        try:
            return await trio.to_thread.run_sync(step, *args)
        except Exception as error:  # the contract refused (too early, a race) or the chain is down
            raise PurchaseError(f"{error}"[:300], "withdraw_failed") from error

    async def deposit(self, seller_key: str, amount_micro_usdc: int) -> dict[str, Any]:
        """Open or top up the channel to a seller before buying (this node submits the deposit
        and pays its gas; the first purchase would otherwise carry it for the seller to
        submit). The seller is named by its key; its pay-to comes from its listings."""
        ledger = self.channel_ledger
        chain = self.channel_chain()
        if ledger is None or chain is None:
            raise PurchaseRefused("this node has no payment channels", "no_channels")
        if amount_micro_usdc <= 0:
            raise PurchaseRefused("a deposit must be positive", "bad_amount")
        stored = await self.memory.run(self.listings.any_of_seller, bytes.fromhex(seller_key))
        if stored is None:
            raise PurchaseRefused(f"no listing of seller {seller_key[:16]} is known: its pay-to "
                                  "address is unknown", "unknown_seller")
        lock = self._channel_locks.setdefault(stored.listing.pay_to.lower(), trio.Lock())
        async with lock:
            channel = await self._channel_for(stored)
            price = stored.listing.price_micro_usdc
            deposit, signature = sign_deposit(self.wallet, channel.terms, self.config.chain.chain_id,
                                              price, amount_micro_usdc, channel.charged_total + price)
            await self.memory.run(ledger.record_pending_deposit, channel.channel_id,
                                  _deposit_json(deposit))
            identifier = bytes.fromhex(channel.channel_id[2:])
            payload = deposit_payload(channel.terms, identifier, deposit,
                                      channel.charged_total + price, signature)
            checked = requirements(channel.terms.receiver, channel.terms.token,
                                   self.config.chain.chain_id, price, channel.terms.withdraw_delay_s)
            try:
                tx_hash = await trio.to_thread.run_sync(chain.deposit, payload,
                                                        checked.model_dump(by_alias=True))
            except Exception as error:
                raise PurchaseError(f"the deposit was not accepted: {error}"[:300],
                                    "deposit_failed") from error
            state = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
            await self.memory.run(ledger.rebase, channel.channel_id,
                                  max(channel.charged_total, state.total_claimed), state.balance)
            await self.memory.run(ledger.drop_pending_deposit, channel.channel_id)
        return {"channel_id": channel.channel_id, "deposit_micro_usdc": state.balance,
                "deposited_micro_usdc": amount_micro_usdc, "tx_hash": tx_hash}

    async def _voucher_refused(self, request_id: str, reason: str) -> None:
        await self.memory.run(self.ledger.update_purchase, request_id, PurchaseState.REFUSED,
                              reason=reason[:500])


def _deposit_json(deposit: ChannelDeposit | None) -> str | None:
    if deposit is None:
        return None
    body = deposit.to_body()
    return json.dumps({key: ("0x" + value.hex() if isinstance(value, bytes) else value)
                       for key, value in body.items()})


def _deposit_from_json(text: str | None) -> ChannelDeposit | None:
    if not text:
        return None
    data = json.loads(text)
    for key in ("salt", "signature"):
        data[key] = bytes.fromhex(data[key][2:])
    return ChannelDeposit.from_body(data)
