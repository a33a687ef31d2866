"""The market as the node's API sees it: one object over the book, selling and purchases.

What the local API's market routes call (``node.api.interface.MarketApi``). It
holds no state of its own: each method is one call into the part of the market
that owns the concept (the publisher, the buyer, the ledger, the living market),
plus the node-level bookkeeping that belongs with it (metrics, the trust event of
a bought skill's outcome). ``node.service`` builds it once the parts exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from node import metrics
from node.crystals import Crystal
from node.market.book import ListingBook
from node.market.ledger import MarketLedger
from node.market.liveness import MarketLiveness
from node.market.purchase import Buyer, PurchaseRefused
from node.market.scan import judge_with_endpoint, scan_text
from node.market.selling import Publisher
from node.memory import AsyncMemory, ExecutionOutcome, Memory

if TYPE_CHECKING:
    from node.chain import SettlementEngine
    from node.config import ChainConfig
    from node.market.purchase import ChannelLedger, Claimer
    from node.market.scan import EndpointSettings
    from node.market.warnings import WarningDesk

TrustRecord = Callable[[bytes, str, str], object]  # the trust ledger's record, on the store's thread


def record_skill_run(memory: Memory, trust_record: TrustRecord, crystal_id: str, success: bool,
                     reward: float | None, note: str | None = None) -> ExecutionOutcome:
    """Record one run of a skill (``memory.record_execution``: counts, confidence, hormones);
    a skill bought from a peer also gives the trust ledger evidence about that seller. The one
    body the node's market face and the CLI without a node both run (store thread)."""
    outcome = memory.record_execution(crystal_id, success, reward, note)
    seller = outcome.crystal.governance.peer_origin
    if seller:
        event = "execution_success" if success else "execution_failure"
        trust_record(bytes.fromhex(seller), event, outcome.crystal.id)
    return outcome


class Market:
    def __init__(self, memory: AsyncMemory, listings: ListingBook, ledger: MarketLedger,
                 publisher: Publisher, buyer: Buyer, liveness: MarketLiveness,
                 trust_record: TrustRecord, wallet_address: str, chain: ChainConfig,
                 engine: Callable[[], SettlementEngine | None], warnings: WarningDesk,
                 channel_ledger: ChannelLedger | None = None,
                 claimer: Claimer | None = None, judge: EndpointSettings | None = None,
                 http_channels: Callable[[], dict[str, Any]] | None = None) -> None:
        self.memory = memory
        self.listings = listings
        self.ledger = ledger
        self.publisher = publisher
        self.buyer = buyer
        self.liveness = liveness
        self._trust_record = trust_record
        self._wallet_address = wallet_address
        self._chain = chain
        self._engine = engine
        self.warnings = warnings
        self._channel_ledger = channel_ledger
        self._claimer = claimer
        self._judge = judge  # scan.judge_* from config; None: no endpoint judge configured
        # The x402 HTTP endpoint's channels, read from the x402 SDK's own store (blocking).
        self._http_channels = http_channels

    # --- skills -------------------------------------------------------------------------------
    async def record_execution(self, crystal_id: str, success: bool, reward: float | None,
                               note: str | None = None) -> ExecutionOutcome:
        return await self.memory.learn(record_skill_run, self._trust_record, crystal_id, success, reward, note)

    async def new_skill_version(self, crystal_id: str, text: str) -> Crystal:
        return await self.memory.new_skill_version(crystal_id, text)

    async def own_skills(self) -> list[dict[str, Any]]:
        own = await self.memory.run(self.listings.own)
        return [item.to_dict() | {"crystal_id": item.own_crystal_id} for item in own]

    # --- selling and the book -----------------------------------------------------------------
    async def publish_skill(self, crystal_id: str, name: str | None = None,
                            summary: str | None = None) -> dict[str, Any]:
        return await self.publisher.publish_skill(crystal_id, name, summary)

    async def endorse_listing(self, listing_id: str) -> dict[str, Any]:
        return await self.publisher.endorse_listing(listing_id)

    async def list_listings(self, category: str | None = None, max_price_micro_usdc: int | None = None,
                            tags: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        return await self.publisher.list_listings(category, max_price_micro_usdc, tags)

    async def search_listings(self, query: str, k: int = 10, category: str | None = None,
                              max_price_micro_usdc: int | None = None,
                              tags: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        return await self.publisher.search_listings(query, k, category, max_price_micro_usdc, tags)

    # --- purchases ----------------------------------------------------------------------------
    async def buy(self, listing_id: str, max_price_micro_usdc: int | None = None,
                  again: bool = False, exact: bool = False) -> dict[str, Any]:
        try:
            result = await self.buyer.buy(listing_id, max_price_micro_usdc, again, exact)
        except PurchaseRefused:
            metrics.PURCHASES.labels(outcome="rejected").inc()
            raise
        except Exception:
            metrics.PURCHASES.labels(outcome="failed").inc()
            raise
        metrics.PURCHASES.labels(outcome="ok").inc()
        metrics.MARKET_MICRO_USDC.labels(direction="spent").inc(result["price_micro_usdc"])
        return result

    async def redeliver(self, listing_id: str) -> dict[str, Any]:
        return await self.buyer.redeliver(listing_id)

    # --- the ledger and the wallet ------------------------------------------------------------
    async def purchases(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.purchases, limit)]

    async def sales(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.sales, limit)]

    async def stats(self) -> dict[str, Any]:
        return await self.memory.run(self.ledger.stats)

    async def wallet(self) -> dict[str, Any]:
        info: dict[str, Any] = {"address": self._wallet_address, "usdc_micro": None, "eth_wei": None,
                                "chain_id": self._chain.chain_id,
                                "token_address": self._chain.token_address}
        engine = self._engine()
        if engine is None:
            return info
        client = engine.client
        try:
            info["usdc_micro"] = await trio.to_thread.run_sync(client.usdc_balance, self._wallet_address)
            info["eth_wei"] = await trio.to_thread.run_sync(client.eth_balance, self._wallet_address)
        except Exception as error:
            info["error"] = str(error)
        return info

    # --- payment channels (x402 batch-settlement) ---------------------------------------------
    async def channels(self) -> dict[str, Any]:
        """The channels this node pays through (deposit, spent, remaining, state) and those
        that pay it (charged, claimed, unclaimed, withdrawal), with the claim totals; those
        that pay it over the x402 HTTP endpoint apart (``http_paid_by``, the SDK's records)."""
        http: dict[str, Any] = {"channels": [], "unreadable": 0}
        if self._http_channels is not None:
            http = await trio.to_thread.run_sync(self._http_channels)
        ledger = self._channel_ledger
        if ledger is None:
            return {"paying": [], "paid_by": [], "unclaimed_micro_usdc": 0,
                    "claims": {"claims": 0, "claimed_micro_usdc": 0, "gas_used": 0},
                    "http_paid_by": http["channels"], "http_unreadable": http["unreadable"]}
        paying = await self.memory.run(ledger.buyer_channels)
        paid_by = await self.memory.run(ledger.seller_channels)
        return {"paying": [channel.to_dict() for channel in paying],
                "paid_by": [channel.to_dict() for channel in paid_by],
                "unclaimed_micro_usdc": await self.memory.run(ledger.exposure),
                "claims": await self.memory.run(ledger.claim_totals),
                "http_paid_by": http["channels"], "http_unreadable": http["unreadable"]}

    async def claim(self) -> dict[str, Any]:
        """Claim every unclaimed voucher now (``market claim``), in as few transactions as
        the claim size allows."""
        if self._claimer is None:
            raise PurchaseRefused("this node has no channel contract to claim from", "no_channels")
        return await self._claimer.claim(force=True)

    async def refund(self, channel_id: str) -> dict[str, Any]:
        """Ask the seller of ``channel_id`` to claim what it is owed and return the rest."""
        return await self.buyer.refund(channel_id)

    async def withdraw(self, channel_id: str) -> dict[str, Any]:
        """Take ``channel_id``'s unclaimed deposit back without the seller: start the timed
        withdrawal, or finalize it once its delay has passed."""
        return await self.buyer.withdraw(channel_id)

    async def deposit(self, seller_key: str, amount_micro_usdc: int) -> dict[str, Any]:
        """Open or top up the channel to ``seller_key``'s pay-to before buying."""
        return await self.buyer.deposit(seller_key, amount_micro_usdc)

    # --- skills an agent can trust (node.market.scan, node.market.warnings) -------------------
    async def scan(self, text: str, judge: bool = False) -> dict[str, Any]:
        """The scanner's report on ``text``; with ``judge``, the configured endpoint's opinion
        next to it (it may raise ok to warn, never lower or quarantine: judge.py)."""
        report = await trio.to_thread.run_sync(scan_text, text)
        if judge:
            report = await trio.to_thread.run_sync(judge_with_endpoint, report, text, self._judge)
        return report.to_dict()

    async def release(self, listing_id: str) -> dict[str, Any]:
        return await self.buyer.release(listing_id)

    async def warn(self, target: str, reason: str) -> dict[str, Any]:
        return await self.warnings.warn(target, reason)

    async def skill_warnings(self) -> list[dict[str, Any]]:
        return await self.memory.run(self.warnings.warned)

    async def safety_status(self) -> dict[str, Any]:
        """What the agent should know at a glance: purchases kept aside, warnings accepted."""
        counts = await self.memory.run(self.ledger.purchase_counts)
        warnings = self.warnings.counts
        return {"quarantined_purchases": counts.get("quarantined", 0),
                "warnings_accepted": warnings.get("accepted", 0),
                "warnings_ignored_untrusted": warnings.get("ignored_untrusted", 0)}
