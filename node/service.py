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
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from node import metrics
from node.audit import AuditLog
from node.chain import ChainClient, ChannelPayments, Channels, SettlementEngine
from node.config import NodeConfig
from node.crystals import CrystalNotFound, Lifecycle, now_ms
from node.db import StoreDamaged
from node.errors import NodeError
from node.keys import load_identity, load_or_create_api_token
from node.market import (
    Buyer,
    ChannelChain,
    ChannelLedger,
    Claimer,
    DeskParts,
    EndpointSettings,
    FacadeChannels,
    FlatReputation,
    ListingBook,
    Market,
    MarketLedger,
    MarketLiveness,
    Publisher,
    ReputationSource,
    Sale,
    Seller,
    SkillsIntake,
    WarningDesk,
    niche_data,
    reconcile_settlements,
    serve_seller,
)
from node.memory import (
    AsyncMemory,
    IndexOptions,
    LearningService,
    Memory,
    SearchRequest,
    WorkingMemoryService,
    data_dir_exclusions,
)
from node.net import NetService
from node.operator import OperatorDesk
from node.ops import passphrase_for, run_scheduled_backups
from node.supervisor import supervise
from node.trust import GateDecision, TrustLevel, TrustService
from node.weather import WeatherDesk
from protocol.messages import TrustReport
from protocol.topics import TRUST

log = logging.getLogger(__name__)

SAFE_RECURSION_LIMIT = 5_000

INDEX_SAVE_INTERVAL_S = 30.0


def scan_judge(config: NodeConfig) -> EndpointSettings | None:
    """The endpoint judge of the API's skill scan route with ``judge`` (``scan.judge_*``), if configured."""
    scan = config.scan
    if not scan.judge_url:
        return None
    return EndpointSettings(scan.judge_url, scan.judge_model, scan.judge_key_env, scan.judge_key_file,
                            scan.judge_timeout_s)


class NodeService:
    """Wires one node and runs it; the API reaches each concept through its face
    (``node.api.interface.NodeApi``): ``memory``, ``working``, ``learning``, ``market``,
    ``trust``, ``weather``, and ``operator`` (the audited undo)."""

    def __init__(self, config: NodeConfig, memory: Memory | None = None,
                 chain_client: ChainClient | None = None) -> None:
        """``chain_client``: an already-connected chain (an in-process one in tests) used
        instead of connecting to ``config.chain.rpc_url``."""
        self.config = config
        self.identity = load_identity(config)
        self.api_token = load_or_create_api_token(config)
        self._memory = memory
        self.memory: AsyncMemory
        self.listings: ListingBook
        self.reputation: ReputationSource = FlatReputation(1.0)
        self.net = NetService(config.net, self.identity, peers_path=config.peers_path,
                              interests=config.market.interests)
        self.started_at_ms = now_ms()
        self.api_port = 0
        self.x402_url: str | None = None
        self.ready = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.wallet_address = self._wallet_address()
        self.engine: SettlementEngine | None = None
        # The chain's batch-settlement channels (vouchers); None: this node pays and sells
        # with ``exact`` only.
        self.channel_chain: ChannelChain | None = None
        self._open_chain(chain_client)

    def _wallet_address(self) -> str:
        from node.chain import load_or_create_wallet

        self.wallet = load_or_create_wallet(self.config.wallet_path)
        return str(self.wallet.address)

    def _open_chain(self, client: ChainClient | None) -> None:
        """Settlement engine + read client; the chain may be down now and come up later."""
        chain = self.config.chain
        if client is None and not chain.rpc_url:
            return
        self.engine = SettlementEngine.open(
            client=client,
            rpc_url=chain.rpc_url,
            chain_id=chain.chain_id,
            token_address=chain.token_address,
            settler_address=chain.settler_address,
            sender=self.wallet,
            data_dir=self.config.data_dir,
            batch_max_size=chain.batch_max_size,
            batch_max_delay_ms=chain.batch_max_delay_ms,
        )
        if self.config.market.vouchers:
            self.channel_chain = FacadeChannels(Channels(self.engine.client, self.wallet))

    def _x402_channels(self) -> ChannelPayments | None:
        """``batch-settlement`` for the x402 endpoint (the SDK's records under the data dir)."""
        if self.engine is None:
            return None
        return ChannelPayments(self.engine.client, self.wallet, self.config.chain.chain_id,
                               self.config.data_dir / "x402-channels")

    # --- wiring -------------------------------------------------------------------------------
    @property
    def is_management(self) -> bool:
        return self.identity.public_key.hex() in {k.lower() for k in self.config.net.management_keys}

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # py_ecc (imported by web3 above) raises the recursion limit to 100,000, past what
        # the C stack holds: deep input would crash the process instead of raising.
        if sys.getrecursionlimit() > SAFE_RECURSION_LIMIT:
            sys.setrecursionlimit(SAFE_RECURSION_LIMIT)
        # A schedule without its passphrase stops the start, not the first backup hours later.
        backup_passphrase = passphrase_for(self.config) if self.config.backup.every_hours > 0 else b""
        memory = self._memory
        if memory is None:
            memory = await trio.to_thread.run_sync(Memory, self.config)
        self.memory = AsyncMemory(memory)
        # One database owner: every concept's repository shares memory's Database and
        # its single writer (memory.db.run).
        self.listings = ListingBook(memory.db)
        self.ledger = MarketLedger(memory.db)
        self.working = WorkingMemoryService(self.config, self.memory, memory,
                                            functools.partial(niche_data, memory.db))
        self.learning = LearningService(self.memory, self.identity)
        self.channel_ledger = ChannelLedger(memory.db)
        self.trust = TrustService(
            memory.db,
            self.config,
            self.identity.public_key,
            [bytes.fromhex(key) for key in self.config.net.management_keys],
            hormones_halt=lambda: memory.hormones.consolidation_modulation().halt_untrusted_ingestion,
            run_in_store=memory.db.run,
            network_size=self.net.network_size_estimate,
        )
        self.reputation = self.trust
        # Every skills-topic message goes to the desk that registered its kind here.
        self.intake = SkillsIntake()
        self.warnings = WarningDesk(
            self.memory, self.listings, self.ledger, self.config.net.management_keys,
            self.identity.public_key, self._trust_level, self._record_trust,
            self.net.gossip.publish, intake=self.intake)
        desk_parts = DeskParts.build(self.config, self.identity, self.memory, self.listings,
                                     self.net.publish, self.net.sequence.next)
        # The x402 endpoint's channels (the SDK's records), claimed by the same claimer.
        self.x402_channels = self._x402_channels() if self.config.x402.enabled else None
        http_channels = self.x402_channels
        self.claimer = Claimer(self.config.market, memory.db.run, self.channel_ledger,
                               lambda: self.channel_chain,
                               lambda key: self.memory.run(self.trust.level, bytes.fromhex(key)),
                               claim_http=http_channels.claim_and_settle if http_channels else None)
        self.publisher = Publisher(
            desk_parts, self.ledger, lambda: self.reputation, self.wallet_address,
            self.is_management, intake=self.intake, origin_level=self._trust_level,
            # This node sees only its shards: a thin book asks the network.
            ask_network=self.net.ask_network if self.net.shards is not None else None,
        )
        self.seller = Seller(
            self.identity, self.net.sequence.next, self.memory, self.listings, self.ledger,
            lambda: self.engine, self.wallet_address, on_sale=self._on_sale,
            channels=lambda: self.channel_chain, channel_ledger=self.channel_ledger,
            channel_state_ttl_s=self.config.market.channel_state_ttl_s,
            channel_min_deposit_micro_usdc=self.config.market.channel_min_deposit_micro_usdc,
            chain_id=self.config.chain.chain_id, token_address=self.config.chain.token_address,
        )
        self.buyer = Buyer(
            self.config, self.identity, self.net.sequence.next, self.net.purchases.request_envelope,
            self.memory, self.listings, self.ledger, self.wallet,
            lambda: self.engine.client if self.engine else None,
            gate=self._gate, on_outcome=self._record_trust,
            on_fresh_listing=functools.partial(self.intake.take_synced,
                                               self.net.validator.check_synced),
            spawn=self._spawn,
            channel_ledger=self.channel_ledger, channel_chain=lambda: self.channel_chain,
        )
        self.weather = WeatherDesk(self.config, self.identity, self.memory,
                                   self.net.gossip.publish, self.is_management)
        self.operator = OperatorDesk(AuditLog(self.config.audit_path), self.trust, memory.db.run,
                                     self.net.ban, self.net.unban, self.weather,
                                     self.publisher.revoke_endorsement)
        self.market_liveness = MarketLiveness(self.publisher, desk_parts, self._buy,
                                              self.net.sync_status)
        self.market = Market(self.memory, self.listings, self.ledger, self.publisher, self.buyer,
                             self.market_liveness, self.trust.record, self.wallet_address,
                             self.config.chain, lambda: self.engine, self.warnings,
                             channel_ledger=self.channel_ledger,
                             claimer=self.claimer if self.channel_chain is not None else None,
                             judge=scan_judge(self.config),
                             http_channels=http_channels.channels if http_channels else None)
        # The network hands each topic and protocol to the desk that owns it.
        self.net.on_listing(self.intake.take)
        self.market_liveness.attach(self.net)  # bounties topic, listings sync (serve and ask)
        self.net.on_weather(self.weather.on_weather)
        self.net.on_trust_report(self.trust.on_trust_report)
        self.net.serve_trust_reports(self.trust.report_page)
        self.net.on_reject(self.trust.on_rejection)
        self.net.on_reject(
            lambda r: metrics.GOSSIP_MESSAGES.labels(topic=r.topic, outcome="rejected", reason=r.reason).inc()
        )
        self.net.add_score_term(self.trust.app_score)
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
                    nursery.start_soon(reconcile_settlements, self.engine, self.memory.db, self.ledger)
                if self.channel_chain is not None:  # claims of the vouchers this node sold
                    await nursery.start(functools.partial(
                        supervise, "claims", self.claimer.run, startable=True,
                        on_crash=_count_crash))
                await nursery.start(self._serve_api)
                if self.config.x402.enabled:  # the public x402 endpoint over our seller
                    self.x402_url = await nursery.start(functools.partial(
                        serve_seller, self.seller, self.config.x402.host, self.config.x402.port,
                        self.x402_channels))
                nursery.start_soon(functools.partial(
                    supervise, "market-liveness", self.market_liveness.run, on_crash=_count_crash))
                nursery.start_soon(functools.partial(
                    supervise, "index-save", self.memory.save_periodically, INDEX_SAVE_INTERVAL_S,
                    on_crash=_count_crash))
                nursery.start_soon(functools.partial(
                    supervise, "consolidation", self.working.consolidate_periodically,  # + auto-scratch
                    self.config.memory.consolidation_interval_s, on_crash=_count_crash))
                nursery.start_soon(functools.partial(
                    supervise, "dream", self.working.dream_periodically, self.config.memory.dream_interval_s,
                    on_crash=_count_crash))
                if self.config.memory.index_paths:  # the operator's own folders, kept in sync
                    nursery.start_soon(functools.partial(
                        supervise, "file-index", self.memory.index_periodically, self.config.memory.index_paths,
                        self._index_options(), self.config.memory.index_interval_s, on_crash=_count_crash))
                if self.config.backup.every_hours > 0:
                    nursery.start_soon(functools.partial(
                        supervise, "backup", run_scheduled_backups, self.config, backup_passphrase,
                        self.identity.peer_id, on_crash=_count_crash))
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

    def _index_options(self) -> IndexOptions:
        memory = self.config.memory
        return IndexOptions(memory.index_namespace, memory.index_max_file_bytes,
                            data_dir_exclusions(self.config.data_dir))

    async def _serve_api(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from hypercorn.config import Config as HypercornConfig
        from hypercorn.trio import serve

        from node.api import build_app

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

    # --- status -------------------------------------------------------------------------------
    async def status(self) -> dict[str, Any]:
        try:
            listings: int | None = await self.memory.run(self.listings.count)
            stats = await self.memory.stats()
        except StoreDamaged:  # status still answers, and says which store (``stores``)
            listings, stats = None, {"total": None}
        return {
            "name": self.config.name,
            "peer_id": self.identity.peer_id,
            "public_key": self.identity.public_key.hex(),
            "network": self.config.net.network,
            "management": self.is_management,
            "listen_addrs": self.net.listen_addrs(),
            "api_port": self.api_port,
            "x402_url": self.x402_url,
            "uptime_s": (now_ms() - self.started_at_ms) // 1000,
            "connected_peers": len([p for p in self.peers() if p["connected"]]),
            "reachability": self.net.reachability_status(),
            "listings_known": listings,
            "crystals": stats["total"],
            "wallet_address": self.wallet_address,
            "weather": self.weather.status(),
            "skill_safety": await self.market.safety_status(),
            "stores": self.store_health(),
        }

    def store_health(self) -> dict[str, str]:
        """Each database file: ``ok``, or ``damaged: …`` once damage was met (writes stopped)."""
        guards = [self.memory.db.guard] + ([self.engine.ledger.guard] if self.engine else [])
        return {guard.path.name: guard.status() for guard in guards}

    def peers(self) -> list[dict[str, Any]]:
        return [
            dataclasses.asdict(peer) | {"rejections": self.net.rejection_counts(peer.peer_id)}
            for peer in self.net.peers()
        ]

    def rejections(self) -> dict[str, dict[str, int]]:
        counter = self.net.rejections
        return {peer: counter.counts(peer) for peer in counter.peers()}

    # --- trust --------------------------------------------------------------------------------
    async def _gate(self, peer_key: bytes) -> GateDecision:
        return await self.memory.run(self.trust.gate, peer_key)

    async def _trust_level(self, peer_key: bytes) -> TrustLevel:
        return await self.memory.run(self.trust.level, peer_key)

    async def _record_trust(self, peer_key: bytes, event: str, detail: str) -> None:
        await self.memory.run(self.trust.record, peer_key, event, detail)

    async def _publish_trust_report(self, report: TrustReport) -> None:
        await self.net.publish(TRUST, report)
        metrics.GOSSIP_PUBLISHED.labels(topic=TRUST).inc()

    def _spawn(self, task: Callable[[], Awaitable[None]]) -> None:
        """Start ``task`` in the node's nursery (a purchase's receipt): purchases run only
        once the node does."""
        assert self._nursery is not None, "the node is not running"
        self._nursery.start_soon(task)

    # --- listings -----------------------------------------------------------------------------
    async def _on_sale(self, sale: Sale) -> None:
        metrics.SALES.labels(outcome="ok").inc()
        metrics.MARKET_MICRO_USDC.labels(direction="earned").inc(sale.price_micro_usdc)

    async def _buy(self, listing_id: str, max_price_micro_usdc: int | None = None,
                   again: bool = False) -> dict[str, Any]:
        """A bounty's fulfilment buys through the market face (its metrics included)."""
        return await self.market.buy(listing_id, max_price_micro_usdc, again)


def _count_crash(name: str, error: BaseException) -> None:
    metrics.SUBSYSTEM_RESTARTS.labels(subsystem=name).inc()



__all__ = ["CrystalNotFound", "Lifecycle", "NodeError", "NodeService", "SearchRequest"]
