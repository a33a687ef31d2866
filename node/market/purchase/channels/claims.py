"""The seller's claims: turning recorded vouchers into money, many channels per transaction.

When to claim is a pure rule (:func:`claim_due`): a channel is claimed when its unclaimed sum
passes the bound for its buyer's trust level (a stranger's vouchers are claimed sooner than a
trusted peer's), when its oldest unclaimed voucher is ``claim_max_age_s`` old, or at once when
the buyer has asked the contract for its deposit back (the withdrawal waits the channel's
``withdraw_delay_s``, at least 15 minutes; the timer looks every ``claim_interval_s``, far
shorter, so the claim lands well before the deposit could leave).

:class:`Claimer` runs the rule on a timer and on demand (``market claim``). A claim is
journaled (which channels, up to which totals) before it is sent
(``ChannelLedger.claim_submitted``); after a crash, :meth:`Claimer.reconcile` re-reads
every channel a journaled claim named and takes the chain's claimed totals as the truth.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from node import metrics
from node.config import MarketConfig
from node.crystals import now_ms
from node.market.purchase.channels.chain import ChannelChain, ClaimEntry
from node.market.purchase.channels.ledger import ChannelLedger, SellerChannel
from node.market.purchase.channels.terms import sdk_config
from node.market.states import ClaimState
from node.trust import TrustLevel

log = logging.getLogger(__name__)

# The most channels in one claim transaction (x402's DEFAULT_MAX_CLAIMS_PER_BATCH).
MAX_CLAIMS_PER_TRANSACTION = 100

LevelOf = Callable[[str], Awaitable[str]]


def claim_bound(market: MarketConfig, level: str) -> int:
    """Unclaimed micro-USDC this seller carries for a buyer of trust ``level``."""
    if level in (TrustLevel.TRUSTED, TrustLevel.VERIFIED):
        return market.claim_bound_trusted_micro_usdc
    if level == TrustLevel.PROVISIONAL:
        return market.claim_bound_provisional_micro_usdc
    return market.claim_bound_untrusted_micro_usdc


def claim_due(channel: SellerChannel, bound_micro_usdc: int, max_age_ms: int, now: int) -> str | None:
    """Why ``channel`` should be claimed now (``withdrawing``, ``bound``, ``age``), or None."""
    unclaimed = channel.unclaimed_micro_usdc
    if unclaimed <= 0:
        return None
    if channel.withdraw_requested_at_s:
        return "withdrawing"
    if unclaimed > bound_micro_usdc:
        return "bound"
    if channel.first_unclaimed_at_ms is not None and now - channel.first_unclaimed_at_ms >= max_age_ms:
        return "age"
    return None


class Claimer:
    def __init__(self, market: MarketConfig, db_run: Callable[..., Awaitable[Any]],
                 ledger: ChannelLedger, chain: Callable[[], ChannelChain | None],
                 level_of: LevelOf,
                 claim_http: Callable[[], dict[str, Any]] | None = None) -> None:
        self.market = market
        self.db_run = db_run
        self.ledger = ledger
        self.chain = chain
        self.level_of = level_of
        # The x402 HTTP endpoint's channels live in the SDK's own store: its channel manager
        # claims them (every claim_max_age_s on the timer, and on ``market claim``).
        self.claim_http = claim_http
        self._http_claimed_at = 0.0
        self._lock = trio.Lock()  # one claim at a time: each reads what the last one left

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The timer: reconcile once, then look every ``claim_interval_s``."""
        task_status.started()
        await self.reconcile()
        while True:
            await trio.sleep(self.market.claim_interval_s)
            try:
                await self.round()
            except Exception as error:  # the chain is down: try again next round
                log.warning("voucher claim round failed error=%s", error)

    async def round(self) -> None:
        """One look: buyers' withdrawals read from the chain, then whatever is due claimed."""
        await self.refresh_withdrawals()
        await self.claim(force=False)
        if trio.current_time() - self._http_claimed_at >= self.market.claim_max_age_s:
            await self._claim_http()

    async def refresh_withdrawals(self) -> None:
        """Re-read every channel with unclaimed vouchers (one call each): a withdrawal the
        buyer started must be seen long before its delay ends."""
        chain = self.chain()
        if chain is None:
            return
        for channel in await self.db_run(self.ledger.unclaimed):
            state = await trio.to_thread.run_sync(chain.channel, channel.channel_id)
            await self.db_run(self.ledger.synced, channel.channel_id, channel.terms,
                              channel.buyer_key, state.balance, state.total_claimed,
                              state.withdraw_requested_at_s)

    async def claim(self, force: bool) -> dict[str, Any]:
        """Claim every channel that is due (all with unclaimed vouchers if ``force``), in
        transactions of up to ``MAX_CLAIMS_PER_TRANSACTION`` channels."""
        chain = self.chain()
        if chain is None:
            return {"claimed_channels": 0, "claimed_micro_usdc": 0, "transactions": []}
        async with self._lock:
            now = now_ms()
            due: list[tuple[SellerChannel, str]] = []
            for channel in await self.db_run(self.ledger.unclaimed):
                bound = claim_bound(self.market, await self.level_of(channel.buyer_key))
                reason = "operator" if force else claim_due(
                    channel, bound, int(self.market.claim_max_age_s * 1000), now)
                if reason is not None and channel.voucher_signature:
                    due.append((channel, reason))
            transactions: list[dict[str, Any]] = []
            claimed = 0
            for start in range(0, len(due), MAX_CLAIMS_PER_TRANSACTION):
                batch = [channel for channel, _ in due[start:start + MAX_CLAIMS_PER_TRANSACTION]]
                outcome = await self._claim_batch(chain, batch)
                transactions.append(outcome)
                claimed += outcome["claimed_micro_usdc"]
            if due:
                log.info("claimed vouchers channels=%d micro_usdc=%d reasons=%s", len(due), claimed,
                         sorted({reason for _, reason in due}))
            result: dict[str, Any] = {"claimed_channels": len(due), "claimed_micro_usdc": claimed,
                                      "transactions": transactions}
            if force and self.claim_http is not None:
                result["x402"] = await self._claim_http()
            return result

    async def _claim_http(self) -> dict[str, Any]:
        """The x402 endpoint's vouchers, through the SDK's channel manager."""
        self._http_claimed_at = trio.current_time()
        if self.claim_http is None:
            return {}
        try:
            return await trio.to_thread.run_sync(self.claim_http)
        except Exception as error:  # nothing to claim is an error to some SDK paths
            log.info("x402 channel claim: %s", error)
            return {"error": str(error)[:200]}

    async def _claim_batch(self, chain: ChannelChain, batch: list[SellerChannel]) -> dict[str, Any]:
        entries = [ClaimEntry(channel_id=channel.channel_id,
                              config=sdk_config(channel.terms).to_dict(),
                              total=channel.charged_total,
                              signature=str(channel.voucher_signature)) for channel in batch]
        totals = {entry.channel_id: entry.total for entry in entries}
        claim_id = secrets.token_hex(16)
        await self.db_run(self.ledger.claim_submitted, claim_id, totals)
        try:
            outcome = await trio.to_thread.run_sync(chain.claim, entries)
        except Exception as error:
            metrics.CHANNEL_CLAIMS.labels(outcome="failed").inc()
            log.warning("voucher claim failed channels=%d error=%s", len(batch), error)
            await self.reconcile()
            return {"tx_hash": None, "claimed_micro_usdc": 0, "error": str(error)[:200]}
        claimed_after = await self._chain_totals(chain, [entry.channel_id for entry in entries])
        state = ClaimState.MINED if outcome.mined else ClaimState.FAILED
        before = sum(channel.claimed_total for channel in batch)
        await self.db_run(self.ledger.claim_finished, claim_id, state, claimed_after,
                          outcome.gas_used, None, outcome.tx_hash)
        metrics.CHANNEL_CLAIMS.labels(outcome=str(state)).inc()
        metrics.CHANNEL_CLAIM_GAS.inc(outcome.gas_used)
        return {"tx_hash": outcome.tx_hash, "gas_used": outcome.gas_used, "state": str(state),
                "channels": len(batch),
                "claimed_micro_usdc": max(0, sum(claimed_after.values()) - before)}

    async def _chain_totals(self, chain: ChannelChain, channel_ids: list[str]) -> dict[str, int]:
        totals = {}
        for channel_id in channel_ids:
            state = await trio.to_thread.run_sync(chain.channel, channel_id)
            totals[channel_id] = state.total_claimed
        return totals

    async def reconcile(self) -> None:
        """After a crash: every journaled claim not known to be mined or failed is settled by
        what the chain says each of its channels has claimed."""
        chain = self.chain()
        if chain is None:
            return
        try:  # claimed totals (a claim or refund mined just before a crash) as the chain has them
            await self.refresh_withdrawals()
        except Exception as error:
            log.warning("claim reconcile: channels unreadable error=%s", error)
        for claim in await self.db_run(self.ledger.open_claims):
            try:
                totals = await self._chain_totals(chain, list(claim.totals))
            except Exception as error:
                log.warning("claim reconcile: chain unreadable error=%s", error)
                return
            mined = all(totals[channel_id] >= total for channel_id, total in claim.totals.items())
            await self.db_run(self.ledger.claim_finished, claim.claim_id,
                              ClaimState.MINED if mined else ClaimState.FAILED, totals, None,
                              None if mined else "not on chain after a restart")
