"""One node: memory, network, API (and chain/market/trust) in one trio nursery.

``crystalmesh run`` builds a ``NodeService`` and awaits ``run()``. Nothing
else in the package starts background tasks: every long-lived task of a node
is started here, so SIGINT/SIGTERM cancel all of them together.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import signal
import sys
from typing import Any

import numpy as np
import trio

from node import metrics
from node.chain.settlement import SettlementEngine
from node.config import NodeConfig
from node.crystals import governance as gov
from node.crystals.model import Crystal, Lifecycle, now_ms
from node.crystals.store import CrystalNotFound
from node.keys import load_identity, load_or_create_api_token
from node.market.buyer import Buyer, PurchaseRefused
from node.market.gates import check_listable
from node.market.ledger import MarketLedger, Sale
from node.market.listings import ListingBook
from node.market.pricing import FlatReputation, ReputationSource, quote, scarcity_for
from node.market.seller import Seller
from node.memory.facade import AsyncMemory, ConsolidationReport, Memory, SearchHit, SearchRequest
from node.memory.requests import add_from_request
from node.net.service import NetService
from node.supervisor import supervise
from node.trust.gate import GateDecision
from node.trust.service import TrustService, trust_rows_for_api
from protocol.envelope import Envelope
from protocol.messages import (
    ListingEndorsement,
    SkillListing,
    TrustReport,
    WeatherAlert,
    endorsement_valid,
    listing_id_for,
    listing_signing_bytes,
)
from protocol.topics import SKILLS, TRUST, WEATHER

log = logging.getLogger(__name__)

SAFE_RECURSION_LIMIT = 5_000

PPM = 1_000_000
INDEX_SAVE_INTERVAL_S = 30.0


class NodeError(RuntimeError):
    """A node operation was refused; the message says why and what to do."""


class NotManagementNode(NodeError):
    pass


def listing_text(listing: SkillListing) -> str:
    return f"{listing.name}. {listing.description} {' '.join(listing.tags)}"


class NodeService:
    def __init__(self, config: NodeConfig, memory: Memory | None = None) -> None:
        self.config = config
        self.identity = load_identity(config)
        self.api_token = load_or_create_api_token(config)
        self._memory = memory
        self.memory: AsyncMemory
        self.listings: ListingBook
        self.reputation: ReputationSource = FlatReputation(1.0)
        self.net = NetService(config.net, self.identity)
        self.started_at_ms = now_ms()
        self.api_port = 0
        self.ready = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.wallet_address = self._wallet_address()
        self.engine: SettlementEngine | None = None
        self._open_chain()

    def _wallet_address(self) -> str:
        from node.chain.wallet import load_or_create_wallet

        self.wallet = load_or_create_wallet(self.config.wallet_path)
        return str(self.wallet.address)

    def _open_chain(self) -> None:
        """Settlement engine + read client; the chain may be down now and come up later."""
        from node.chain.settlement import SettlementEngine

        chain = self.config.chain
        if not chain.rpc_url:
            return
        self.engine = SettlementEngine.open(
            rpc_url=chain.rpc_url,
            chain_id=chain.chain_id,
            token_address=chain.token_address,
            settler_address=chain.settler_address,
            sender=self.wallet,
            data_dir=self.config.data_dir,
            batch_max_size=chain.batch_max_size,
            batch_max_delay_ms=chain.batch_max_delay_ms,
        )

    async def _reconcile_settlements(self) -> None:
        """Finish settlements a crash left open; retried until the chain answers."""
        if self.engine is None:
            return
        delay = 1.0
        while True:
            try:
                rows = await self.engine.reconcile_async()
                if rows:
                    log.info("reconciled settlements count=%d", len(rows))
                # The sale rows follow the chain: a crash between settling and updating a
                # sale left it 'authorized' although the money arrived.
                for row in rows:
                    nonce = "0x" + row.authorization.nonce.hex()
                    state = "settled" if row.settled else ("failed" if row.state == "failed" else None)
                    if state is not None:
                        await self.memory.run(self.ledger.sale_followed_settlement,
                                              row.authorization.from_address, nonce, state,
                                              row.tx_hash)
                return
            except Exception as error:
                log.warning("settlement reconcile failed, retrying error=%s", error)
                await trio.sleep(delay)
                delay = min(delay * 2, 60.0)

    # --- wiring -------------------------------------------------------------------------------
    @property
    def is_management(self) -> bool:
        return self.identity.public_key.hex() in {k.lower() for k in self.config.net.management_keys}

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # py_ecc (imported by web3 above) raises the recursion limit to 100,000, past what
        # the C stack holds: deep input would crash the process instead of raising.
        if sys.getrecursionlimit() > SAFE_RECURSION_LIMIT:
            sys.setrecursionlimit(SAFE_RECURSION_LIMIT)
        memory = self._memory
        if memory is None:
            memory = await trio.to_thread.run_sync(Memory, self.config)
        self.memory = AsyncMemory(memory)
        self.listings = ListingBook(memory.store)
        self.ledger = MarketLedger(memory.store)
        self.seller = Seller(
            self.identity, self.net.sequence.next, self.memory, self.listings, self.ledger,
            lambda: self.engine, self.wallet_address, on_sale=self._on_sale,
        )
        self.buyer = Buyer(
            self.config, self.identity, self.net.sequence.next, self.net.purchases.request_envelope,
            self.memory, self.listings, self.ledger, self.wallet,
            lambda: self.engine.client if self.engine else None,
        )
        self.trust = TrustService(
            memory.store,
            self.config,
            self.identity.public_key,
            [bytes.fromhex(key) for key in self.config.net.management_keys],
            hormones_halt=lambda: memory.hormones.consolidation_modulation().halt_untrusted_ingestion,
            run_in_store=self.memory.run,
        )
        self.reputation = self.trust
        self.buyer.gate = self._gate
        self.buyer.on_outcome = self._record_trust
        self.net.on_listing(self._on_listing)
        self.net.on_weather(self._on_weather)
        self.net.on_trust_report(self.trust.on_trust_report)
        self.net.on_reject(self.trust.on_rejection)
        self.net.on_reject(
            lambda r: metrics.GOSSIP_MESSAGES.labels(topic=r.topic, outcome="rejected", reason=r.reason).inc()
        )
        self.net.app_score_hooks.append(self.trust.app_score)
        self.net.serve_purchases(self.seller.handle)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.net.run)
                # Subsystems a bug or a hostile input could crash are restarted, not fatal.
                await nursery.start(functools.partial(
                    supervise, "trust", self.trust.run, self._publish_trust_report, self.net.ban,
                    startable=True, on_crash=_count_crash))
                if self.engine is not None:
                    await nursery.start(functools.partial(
                        supervise, "settlement", self.engine.run, startable=True,
                        on_crash=_count_crash))
                    nursery.start_soon(self._reconcile_settlements)
                await nursery.start(self._serve_api)
                nursery.start_soon(functools.partial(
                    supervise, "index-save", self._periodic_index_save, on_crash=_count_crash))
                nursery.start_soon(functools.partial(
                    supervise, "consolidation", self._periodic_consolidation,
                    on_crash=_count_crash))
                nursery.start_soon(self._watch_signals, nursery.cancel_scope)
                self._write_runtime_files()
                self.ready.set()
                log.info(
                    "node ready name=%s peer_id=%s api_port=%d",
                    self.config.name,
                    self.identity.peer_id,
                    self.api_port,
                )
                task_status.started()
        finally:
            self._remove_runtime_files()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(memory.close)

    async def _serve_api(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from hypercorn.config import Config as HypercornConfig
        from hypercorn.trio import serve

        from node.api.routes import build_app

        app = build_app(self, self.api_token)
        listener = await trio.open_tcp_listeners(self.config.api.port, host=self.config.api.host)
        self.api_port = listener[0].socket.getsockname()[1]
        for sock in listener:
            sock.socket.close()
        app.bind(self.config.api.host, self.api_port)
        hypercorn_config = HypercornConfig()
        hypercorn_config.bind = [f"{self.config.api.host}:{self.api_port}"]
        hypercorn_config.accesslog = None
        hypercorn_config.errorlog = logging.getLogger("hypercorn.error")
        hypercorn_config.graceful_timeout = 1.0
        await serve(app, hypercorn_config, task_status=task_status)  # type: ignore[arg-type]

    async def _watch_signals(self, cancel_scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("shutting down signal=%s", signal.Signals(signum).name)
                cancel_scope.cancel()
                return

    def _write_runtime_files(self) -> None:
        self.config.pid_path.write_text(f"{os.getpid()}\n")
        self.config.api_port_path.write_text(f"{self.api_port}\n")

    def _remove_runtime_files(self) -> None:
        for path in (self.config.pid_path, self.config.api_port_path):
            try:
                if path == self.config.pid_path and path.read_text().strip() != str(os.getpid()):
                    continue
                path.unlink()
            except OSError:
                pass

    async def _periodic_index_save(self) -> None:
        memory = self.memory.memory
        while True:
            await trio.sleep(INDEX_SAVE_INTERVAL_S)
            if memory.index.dirty:
                await self.memory.run(memory.index.save)
            await self.memory.run(memory.save_hormones)

    async def _periodic_consolidation(self) -> None:
        while True:
            await trio.sleep(self.config.memory.consolidation_interval_s)
            try:
                await self.consolidate()
            except Exception:
                log.exception("consolidation failed")

    # --- status -------------------------------------------------------------------------------
    async def status(self) -> dict[str, Any]:
        listings = await self.memory.run(self.listings.count)
        stats = await self.memory.run(self.memory.memory.store.stats)
        return {
            "name": self.config.name,
            "peer_id": self.identity.peer_id,
            "public_key": self.identity.public_key.hex(),
            "management": self.is_management,
            "listen_addrs": self.net.listen_addrs(),
            "api_port": self.api_port,
            "uptime_s": (now_ms() - self.started_at_ms) // 1000,
            "connected_peers": len([p for p in self.peers() if p["connected"]]),
            "listings_known": listings,
            "crystals": stats["total"],
            "wallet_address": self.wallet_address,
            "weather": self.weather(),
        }

    def peers(self) -> list[dict[str, Any]]:
        return [
            dataclasses.asdict(peer) | {"rejections": self.net.rejection_counts(peer.peer_id)}
            for peer in self.net.peers()
        ]

    def rejections(self) -> dict[str, dict[str, int]]:
        counter = self.net.rejections
        return {peer: counter.counts(peer) for peer in counter.peers()}

    # --- memory -------------------------------------------------------------------------------
    async def search(self, request: SearchRequest) -> list[SearchHit]:
        return await self.memory.search(request)

    async def memory_status(self) -> dict[str, Any]:
        return await self.memory.run(self.memory.memory.status)

    async def memory_stats(self) -> dict[str, Any]:
        return await self.memory.run(self.memory.memory.store.stats)

    async def purchases(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.purchases, limit)]

    async def sales(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.sales, limit)]

    async def own_skills(self) -> list[dict[str, Any]]:
        own = await self.memory.run(self.listings.own)
        return [item.to_dict() | {"crystal_id": item.own_crystal_id} for item in own]

    async def market_stats(self) -> dict[str, Any]:
        return await self.memory.run(self.ledger.stats)

    async def add_crystal(self, body: dict[str, Any]) -> Crystal:
        return await self.memory.run(add_from_request, self.memory.memory, body)

    async def crystal_detail(self, crystal_id: str) -> dict[str, Any]:
        memory = self.memory.memory

        def detail() -> dict[str, Any]:
            crystal = memory.get(crystal_id)
            return crystal.to_dict() | {"audit": memory.store.audit_log(crystal.id, 20)}

        return await self.memory.run(detail)

    async def consolidate(self, purge: bool = False) -> ConsolidationReport:
        try:
            report = await self.memory.run(self.memory.memory.consolidate, None, purge)
        except Exception:
            metrics.CONSOLIDATION_RUNS.labels(outcome="failed").inc()
            raise
        metrics.CONSOLIDATION_RUNS.labels(outcome="ok").inc()
        return report

    async def record_execution(self, crystal_id: str, success: bool, reward: float | None) -> Crystal:
        crystal = await self.memory.run(
            self.memory.memory.record_execution, crystal_id, success, reward
        )
        seller = crystal.governance.peer_origin
        if seller:
            # A skill bought from a peer: its outcome is evidence about that peer.
            event = "execution_success" if success else "execution_failure"
            await self._record_trust(bytes.fromhex(seller), event, crystal.id)
        return crystal

    # --- trust --------------------------------------------------------------------------------
    async def _gate(self, peer_key: bytes) -> GateDecision:
        return await self.memory.run(self.trust.gate, peer_key)

    async def _record_trust(self, peer_key: bytes, event: str, detail: str) -> None:
        await self.memory.run(self.trust.record, peer_key, event, detail)

    async def _publish_trust_report(self, report: TrustReport) -> None:
        await self.net.publish(TRUST, report)
        metrics.GOSSIP_PUBLISHED.labels(topic=TRUST).inc()

    def trust_rows(self) -> list[dict[str, Any]]:
        return trust_rows_for_api(self.trust)

    async def new_skill_version(self, crystal_id: str, text: str) -> Crystal:
        return await self.memory.run(self.memory.memory.new_skill_version, crystal_id, text)

    # --- listings -----------------------------------------------------------------------------
    async def publish_skill(self, crystal_id: str, name: str | None = None,
                            summary: str | None = None) -> dict[str, Any]:
        memory = self.memory.memory
        crystal = await self.memory.run(memory.get, crystal_id)
        name, summary = listing_name_and_summary(crystal, name, summary)
        check_listable(
            crystal,
            min_executions=self.config.market.min_executions,
            min_success_rate=self.config.market.min_success_rate,
        )
        crystal = await self.memory.run(memory.ensure_stable_skill_id, crystal.id)
        assert crystal.stable_skill_id is not None
        similar = await self.memory.run(
            self.listings.count_similar, crystal.skill_category or "general", self.identity.public_key
        )
        previous = None
        if crystal.previous_version_id:
            older = await self.memory.run(self.listings.own_for_crystal, crystal.previous_version_id)
            previous = older.listing.listing_id if older else None
        unique_buyers = await self.memory.run(self._unique_buyers, crystal.stable_skill_id)
        market = self.config.market
        breakdown = quote(
            base_micro_usdc=market.base_price_micro_usdc,
            successes=crystal.execution.successes,
            executions=crystal.execution.executions,
            avg_reward=crystal.execution.avg_reward,
            unique_buyers=unique_buyers,
            reputation=self.reputation.reputation(self.identity.public_key),
            scarcity=scarcity_for(similar),
            min_micro=market.min_price_micro_usdc,
            max_micro=market.max_price_micro_usdc,
        )
        issued = now_ms()
        listing = SkillListing(
            listing_id=listing_id_for(
                self.identity.public_key, crystal.stable_skill_id, crystal.skill_version
            ),
            stable_skill_id=crystal.stable_skill_id,
            skill_version=crystal.skill_version,
            name=name,
            description=summary,
            tags=tuple(dict.fromkeys(t[:32] for t in crystal.skill_tags))[:16],
            category=(crystal.skill_category or "general")[:64],
            content_hash=crystal.hash,
            size_bytes=len(crystal.text.encode()),
            price_micro_usdc=breakdown.price_micro_usdc,
            pay_to=self.wallet_address,
            chain_id=self.config.chain.chain_id,
            token_address=self.config.chain.token_address,
            executions=crystal.execution.executions,
            successes=crystal.execution.successes,
            reward_sum_ppm=round(crystal.execution.reward_sum * PPM),
            unique_buyers=unique_buyers,
            expires_at_ms=issued + market.listing_ttl_s * 1000,
            previous_listing_id=previous,
        )
        envelope = await self.net.gossip.publish(SKILLS, listing, issued_at_ms=issued)
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self._store_listing(envelope, own_crystal_id=crystal.id)
        return {"listing_id": listing.listing_id, "price_micro_usdc": listing.price_micro_usdc,
                "price": breakdown.to_dict(), "crystal_id": crystal.id,
                "skill_version": listing.skill_version, "previous_listing_id": previous}

    async def _on_sale(self, sale: Sale) -> None:
        metrics.SALES.labels(outcome="ok").inc()
        metrics.MARKET_MICRO_USDC.labels(direction="earned").inc(sale.price_micro_usdc)

    def _unique_buyers(self, stable_skill_id: str) -> int:
        return self.ledger.unique_buyers(stable_skill_id)

    # --- purchases ----------------------------------------------------------------------------
    async def buy(self, listing_id: str, max_price_micro_usdc: int | None = None,
                  again: bool = False) -> dict[str, Any]:
        try:
            result = await self.buyer.buy(listing_id, max_price_micro_usdc, again)
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

    async def wallet_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"address": self.wallet_address, "usdc_micro": None, "eth_wei": None,
                                "chain_id": self.config.chain.chain_id,
                                "token_address": self.config.chain.token_address}
        if self.engine is None:
            return info
        client = self.engine.client
        try:
            info["usdc_micro"] = await trio.to_thread.run_sync(client.usdc_balance, self.wallet_address)
            info["eth_wei"] = await trio.to_thread.run_sync(client.eth_balance, self.wallet_address)
        except Exception as error:
            info["error"] = str(error)
        return info

    async def _store_listing(self, envelope: Envelope, own_crystal_id: str | None = None) -> bool:
        listing = envelope.message()
        assert isinstance(listing, SkillListing)
        vectors = await trio.to_thread.run_sync(self.memory.memory.embed, [listing_text(listing)])
        return await self.memory.run(
            self.listings.upsert, envelope, envelope.to_bytes(), vectors[0], own_crystal_id
        )

    @staticmethod
    def _count_accepted(topic: str, envelope: Envelope) -> None:
        metrics.GOSSIP_MESSAGES.labels(topic=topic, outcome="accepted", reason="").inc()
        metrics.GOSSIP_LATENCY.labels(topic=topic).observe(
            max(0, now_ms() - envelope.issued_at_ms) / 1000)

    async def _on_listing(self, envelope: Envelope) -> None:
        self._count_accepted(SKILLS, envelope)
        if envelope.kind == ListingEndorsement.KIND:
            await self._apply_endorsement(envelope)
            return
        if envelope.sender == self.identity.public_key:
            return
        await self._store_listing(envelope)

    async def _apply_endorsement(self, envelope: Envelope) -> bool:
        """Record a management key's endorsement of a listing we hold, if its signature holds."""
        endorsement = envelope.message()
        assert isinstance(endorsement, ListingEndorsement)
        stored = await self.memory.run(self.listings.get, endorsement.listing_id)
        if stored is None or not endorsement_valid(stored.listing, envelope.sender,
                                                   endorsement.signature):
            log.info("endorsement dropped listing=%s known=%s", endorsement.listing_id[:16],
                     stored is not None)
            return False
        return await self.memory.run(self.listings.record_endorsement, endorsement.listing_id,
                                     envelope.sender)

    async def endorse_listing(self, listing_id: str) -> dict[str, Any]:
        """Management nodes: vouch for a listing network-wide (gossiped; stored by every node)."""
        if not self.is_management:
            raise NotManagementNode(
                "only a management node can endorse: its public key "
                f"{self.identity.public_key.hex()} is not in [net] management_keys"
            )
        stored = await self.memory.run(self.listings.get, listing_id)
        if stored is None:
            raise NodeError(f"unknown listing {listing_id}")
        unendorsed = dataclasses.replace(stored.listing, endorsement=None)
        signature = self.identity.sign(listing_signing_bytes(unendorsed))
        message = ListingEndorsement(listing_id=stored.listing.listing_id, signature=signature)
        envelope = await self.net.gossip.publish(SKILLS, message)
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self._apply_endorsement(envelope)
        return {"listing_id": message.listing_id, "endorsed_by": self.identity.public_key.hex()}

    async def list_listings(
        self,
        category: str | None = None,
        max_price_micro_usdc: int | None = None,
        tags: tuple[str, ...] = (),
    ) -> list[dict[str, Any]]:
        items = await self.memory.run(
            self.listings.active, None, category, max_price_micro_usdc, tags
        )
        return [item.to_dict() for item in items]

    async def search_listings(
        self,
        query: str,
        k: int = 10,
        category: str | None = None,
        max_price_micro_usdc: int | None = None,
        tags: tuple[str, ...] = (),
    ) -> list[dict[str, Any]]:
        items = await self.memory.run(
            self.listings.active, None, category, max_price_micro_usdc, tags
        )
        if not items:
            return []
        ids = [item.listing.listing_id for item in items]
        vectors = await self.memory.run(self.listings.embeddings, ids)
        query_vector = (await trio.to_thread.run_sync(self.memory.memory.embed, [query]))[0]
        scored = []
        for item in items:
            vector = vectors.get(item.listing.listing_id)
            score = float(np.dot(vector, query_vector)) if vector is not None else 0.0
            scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [item.to_dict() | {"score": round(score, 4)} for score, item in scored[:k]]

    # --- weather ------------------------------------------------------------------------------
    def weather(self) -> dict[str, Any]:
        hormones = self.memory.memory.hormones
        return hormones.weather() | {
            "halt_untrusted_ingestion": hormones.consolidation_modulation().halt_untrusted_ingestion
        }

    async def _on_weather(self, envelope: Envelope) -> None:
        alert = envelope.message()
        assert isinstance(alert, WeatherAlert)
        if envelope.sender != self.identity.public_key:
            self._count_accepted(WEATHER, envelope)
        memory = self.memory.memory
        applied = memory.hormones.apply_network_cortisol_spike(
            alert.cortisol_level_ppm / PPM, alert.expires_at_ms, alert.reason
        )
        log.warning(
            "weather alert level=%.2f expires_at_ms=%d reason=%s applied=%s",
            alert.cortisol_level_ppm / PPM,
            alert.expires_at_ms,
            alert.reason,
            applied,
        )
        await self.memory.run(memory.save_hormones)

    async def broadcast_weather(self, level: float, duration_s: int, reason: str) -> dict[str, Any]:
        if not self.is_management:
            raise NotManagementNode(
                "this node is not a management node: its public key "
                f"{self.identity.public_key.hex()} is not in [net] management_keys"
            )
        if not 0.0 <= level <= 1.0:
            raise NodeError("level must be between 0 and 1")
        if not 0 < duration_s <= self.config.net.max_weather_duration_s:
            raise NodeError(
                f"duration must be between 1 s and {self.config.net.max_weather_duration_s} s"
            )
        issued = now_ms()
        alert = WeatherAlert(
            cortisol_level_ppm=round(level * PPM),
            issued_at_ms=issued,
            expires_at_ms=issued + duration_s * 1000,
            reason=reason[:280],
        )
        envelope = await self.net.gossip.publish(WEATHER, alert, issued_at_ms=issued)
        metrics.GOSSIP_PUBLISHED.labels(topic=WEATHER).inc()
        await self._on_weather(envelope)
        return {"issued_at_ms": issued, "expires_at_ms": alert.expires_at_ms,
                "level": level, "reason": alert.reason, "seq": envelope.seq}


def _count_crash(name: str, error: BaseException) -> None:
    metrics.SUBSYSTEM_RESTARTS.labels(subsystem=name).inc()


MAX_SUMMARY_CHARS = 1024
DEFAULT_NAME_WORDS = 8


def listing_name_and_summary(crystal: Crystal, name: str | None,
                             summary: str | None) -> tuple[str, str]:
    """What a listing shows every peer: a name and a seller-written summary, never the skill.

    Without ``name`` the first words of the skill's first line stand in (at most
    8, and at most half of the skill's words), without ``summary`` its category
    and tags. Both, and the skill itself, must pass the secret/PII classifier:
    a flagged publish is refused naming the class.
    """
    words = crystal.text.split()
    if name is None:
        first_line = crystal.text.strip().splitlines()[0].split() if crystal.text.strip() else []
        keep = min(DEFAULT_NAME_WORDS, max(1, len(words) // 2))
        name = " ".join(first_line[:keep]) + (" …" if len(first_line) > keep else "")
    if summary is None:
        tags = ", ".join(crystal.skill_tags[:8])
        summary = f"A {crystal.skill_category or 'general'} skill" + (f" ({tags})" if tags else "") + "."
    name, summary = name.strip()[:128], summary.strip()
    if not name:
        raise NodeError("a listing needs a name")
    if len(summary) > MAX_SUMMARY_CHARS:
        raise NodeError(f"the summary is longer than {MAX_SUMMARY_CHARS} characters")
    for what, text in (("skill", crystal.text), ("name", name), ("summary", summary)):
        classes = gov.sensitive_classes(text)
        if classes:
            raise NodeError(f"refusing to publish: the {what} looks like it contains "
                            f"{', '.join(classes)} (secret/PII classifier)")
    return name, summary


__all__ = ["CrystalNotFound", "Lifecycle", "NodeError", "NodeService", "SearchRequest"]
