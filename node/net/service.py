"""NetService: the whole network side of one node, run in one trio nursery.

    net = NetService(config.net, identity)
    net.on_listing(handle_listing)            # async (Envelope) -> None
    net.on_weather(handle_weather)
    net.on_trust_report(handle_trust_report)
    net.serve_purchases(handle_purchase)      # async (peer_id, Envelope) -> bytes
    (peers beyond ``bootstrap`` are found by ``discovery``: Kademlia random walks;
    behind NAT, ``reachability`` holds relay reservations and dials through relays)
    await nursery.start(net.run)              # listening and subscribed once started
    await net.publish(topics.SKILLS, listing)

With ``peers_path`` the node keeps its last good peers there
(``saved_peers``) and dials them on start, next to ``bootstrap``.

Start order matters in py-libp2p 0.8.1: the Pubsub and GossipSub services
must be running before ``host.run`` (bootstrap dials as soon as the host
listens, and an inbound pubsub stream before the services start crashes
them). Cancelling ``run`` stops everything in reverse order.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import multiaddr
import trio
from libp2p.kad_dht.routing_table import peer_id_to_key
from libp2p.peer.id import ID
from libp2p.tools.anyio_service import background_trio_service

from node.config import NetConfig
from node.net import saved_peers
from node.net.dht import ProviderRecords, dht_size_estimate, speaks
from node.net.discovery import Discovery, DiscoveryConfig
from node.net.gossip import TOPICS, EnvelopeHandler, Gossip, SequenceSource
from node.net.gossip_config import GossipConfig, build_pubsub, build_router
from node.net.host import build_host, listen_addrs, to_peer_id
from node.net.listing_sync import (
    SYNC_STALLED,
    ListingSync,
    SyncLimits,
    SyncPager,
    SyncSource,
)
from node.net.peers import PeerManager, PeerStatus
from node.net.reach import Reachability, ReachabilityConfig
from node.net.reqresp import PurchaseTransport, RequestHandler
from node.net.rules import (
    MessageValidator,
    PeerScores,
    RejectHook,
    Rejection,
    RejectionCounter,
    ScoringConfig,
    rate_limits,
    wall_clock_ms,
)
from node.net.shards import ListingShards
from protocol.envelope import Envelope
from protocol.identity import Identity, peer_id_from_public_key
from protocol.topics import (
    BOUNTIES,
    DHT_PROTOCOL,
    LISTINGS_SYNC_PROTOCOL,
    LISTINGS_SYNC_PROTOCOL_V2,
    PURCHASE_PROTOCOL,
    SKILLS,
    TRUST,
    WEATHER,
    normalize_term,
    on_network,
    provider_key,
)

logger = logging.getLogger(__name__)


async def _no_auto_connect() -> None:
    """Replaces the swarm's AutoConnector: it redials any peerstore peer, banned ones too."""


class NetService:
    def __init__(
        self,
        config: NetConfig,
        identity: Identity,
        *,
        gossip_config: GossipConfig | None = None,
        scoring_config: ScoringConfig | None = None,
        now_ms: Any = wall_clock_ms,
        purchase_timeout_s: float = 30.0,
        deliver_own: bool = False,
        discovery_config: DiscoveryConfig | None = None,
        sync_limits: SyncLimits | None = None,
        peers_path: Path | None = None,
        save_peers_s: float = 5.0,
        interests: Sequence[str] = ("*",),
    ) -> None:
        self.config = config
        self.identity = identity
        self.network = config.network
        self.gossip_config = gossip_config or GossipConfig(heartbeat_s=config.heartbeat_s)
        self.reachability: Reachability | None = None
        parts = build_host(identity.seed, config.listen, extra_addrs=self._extra_addrs)
        self.host = parts.host
        self._listen = parts.listen_addrs
        self.host.get_network().auto_connector.maybe_connect = _no_auto_connect  # type: ignore[attr-defined,method-assign]

        self.scores = PeerScores(scoring_config)
        # Management nodes carry the weather: scoring never penalises, graylists or bans them.
        self.management_peers = frozenset(
            peer_id_from_public_key(bytes.fromhex(key)) for key in config.management_keys
        )
        # Extra application-specific score terms (``add_score_term``: the trust layer's).
        self._score_terms: list[Callable[[str], float]] = []
        self.rejections = RejectionCounter()
        self.validator = MessageValidator(
            management_keys=[bytes.fromhex(key) for key in config.management_keys],
            clock_window_s=config.clock_window_s,
            max_weather_duration_s=config.max_weather_duration_s,
            now_ms=now_ms,
            max_message_bytes=self.gossip_config.max_message_bytes,
            rate_limits=rate_limits(config),
            own_key=identity.public_key,
        )
        self.router = build_router(self.gossip_config, self._app_score)
        self.pubsub = build_pubsub(self.host, self.router, self.gossip_config)
        self.sequence = SequenceSource(now_ms)
        self.gossip = Gossip(
            identity,
            self.pubsub,
            self.validator,
            self.rejections,
            sequence=self.sequence,
            deliver_own=deliver_own,
            on_rejected=self._on_rejected,
            network=self.network,
        )
        discovery = discovery_config or DiscoveryConfig(enabled=config.discovery)
        # Discovery drives the peer manager and the manager looks lost peers up in discovery's
        # DHT: the manager gets ``_locate``, which asks the discovery built just below.
        self.peer_manager = PeerManager(
            self.host,
            list(config.bootstrap),
            score_of=self.scores.score,
            max_backoff_s=config.reconnect_max_backoff_s,
            locate=self._locate if discovery.enabled else None,
        )
        self.discovery = (
            Discovery(self.host, self.peer_manager, discovery,
                      protocol_id=on_network(DHT_PROTOCOL, self.network))
            if discovery.enabled else None
        )
        self.reachability = Reachability(
            self.host, ReachabilityConfig.from_config(config),
            is_banned=lambda peer: peer in self.peer_manager.banned,
            find_addrs=self.discovery.find_addrs if self.discovery is not None else None,
        )
        self.providers = (ProviderRecords(self.discovery.dht)
                          if self.discovery is not None else None)
        self._advertised: set[bytes] = set()
        self.shards = (ListingShards(self.gossip, config.listing_shards, interests,
                                     config.listing_legacy_publish, advertise=self.advertise)
                       if config.listing_shards else None)
        # Subscriptions to any other topic (another network's) are not even tracked.
        self.pubsub.allowed_topics = frozenset(self.gossip.wire_topic(topic) for topic in TOPICS) | (
            self.shards.wire_topics() if self.shards is not None else frozenset())
        self.last_network_search: dict[str, Any] | None = None
        self._background: trio.Nursery | None = None
        self.peers_path = peers_path
        self.save_peers_s = save_peers_s
        self.saved: list[saved_peers.SavedPeer] = []
        self._saved_key: frozenset[tuple[str, tuple[str, ...]]] = frozenset()
        self._saved_at = 0.0
        if peers_path is not None:
            self.saved = saved_peers.read(peers_path, self.network, str(self.host.get_id()))
            self._saved_key = frozenset((p.peer_id, p.addrs) for p in self.saved)
            for peer in self.saved:
                for addr in peer.dial_addrs():
                    self.peer_manager.keep(addr)
            if self.saved:
                logger.info("dialling saved peers count=%d", len(self.saved))
        self.purchases = PurchaseTransport(
            self.host,
            identity,
            self.sequence.next,
            handler_timeout_s=purchase_timeout_s,
            is_banned=lambda peer: peer in self.peer_manager.banned,
            clock_window_ms=int(config.clock_window_s * 1000),
            now_ms=now_ms,
            protocol_id=on_network(PURCHASE_PROTOCOL, self.network),
            connect=self.reachability.connect,
        )
        self.sync = ListingSync(
            self.host,
            identity,
            self.sequence.next,
            self.validator,
            self.gossip.deliver,
            self._penalize,
            is_banned=lambda peer: peer in self.peer_manager.banned,
            limits=sync_limits,
            clock_window_ms=int(config.clock_window_s * 1000),
            protocol_id=on_network(LISTINGS_SYNC_PROTOCOL, self.network),
            connect=self.reachability.connect,
            protocol_id_v2=on_network(LISTINGS_SYNC_PROTOCOL_V2, self.network),
            shards=self._followed_shards,
        )
        self._sync_source: SyncSource | None = None
        self._started = trio.Event()

    # ------------------------------------------------------------------ identity
    @property
    def peer_id(self) -> str:
        return str(self.host.get_id())

    def listen_addrs(self) -> list[str]:
        """Actual addresses, each ending in ``/p2p/<peer id>`` (valid once ``run`` started).

        A private node's ``/p2p-circuit`` addresses (through its relays) come last.
        """
        return listen_addrs(self.host)

    async def _locate(self, peer: ID) -> None:
        """The peer manager's look-up of a lost peer by id: discovery's DHT."""
        if self.discovery is not None:
            await self.discovery.locate(peer)

    def _extra_addrs(self) -> list[multiaddr.Multiaddr]:
        return self.reachability.extra_addrs() if self.reachability is not None else []

    def reachability_status(self) -> dict[str, Any]:
        """AutoNAT verdict, relay service and reservations (``status`` JSON, metrics, dashboard)."""
        assert self.reachability is not None
        return self.reachability.describe()

    # ------------------------------------------------------------------ gossip
    def on_listing(self, handler: EnvelopeHandler) -> None:
        self.gossip.on(SKILLS, handler)

    def on_weather(self, handler: EnvelopeHandler) -> None:
        self.gossip.on(WEATHER, handler)

    def on_trust_report(self, handler: EnvelopeHandler) -> None:
        self.gossip.on(TRUST, handler)

    def on_bounty(self, handler: EnvelopeHandler) -> None:
        self.gossip.on(BOUNTIES, handler)

    def _followed_shards(self) -> tuple[int, frozenset[int]] | None:
        """(shard count, shards followed) for listings sync, None when every listing is wanted."""
        shards = self.shards
        if shards is None or len(shards.follows) >= shards.shards:
            return None
        return shards.shards, frozenset(shards.follows)

    def serve_listings_sync(self, source: SyncSource) -> None:
        """Answer ``/crystalmesh/<network>/listings-sync/2`` and ``/1`` from ``source``."""
        self._sync_source = source
        self.sync.serve(source)

    def serve_trust_reports(self, source: SyncPager) -> None:
        """Answer ``trust_reports_request`` (listings-sync/2) from ``source``, and ask each new
        version-2 peer for its trust reports once (a joiner's EigenTrust inputs)."""
        self.sync.serve_trust_reports(source)

    async def publish(self, topic: str, message: Any, issued_at_ms: int | None = None) -> Envelope:
        """Seal ``message`` with our key and next seq, and gossip it on ``topic``.

        With listing shards on, a skills-topic message goes to its shard (``node.net.shards``).
        """
        if topic == SKILLS and self.shards is not None:
            return await self.shards.publish(message, issued_at_ms)
        return await self.gossip.publish(topic, message, issued_at_ms)

    # ------------------------------------------------------------------ provider records
    def advertise(self, terms: Sequence[str], max_keys: int = 64) -> int:
        """Keep DHT provider records for ``terms`` (categories, tags we sell); returns new keys.

        In the background (a provide is a DHT lookup); at most ``max_keys`` keys per node.
        """
        if self.providers is None or self._background is None:
            return 0
        fresh = []
        for term in terms:
            key = provider_key(term) if normalize_term(term) else b""
            if key and key not in self._advertised and len(self._advertised) < max_keys:
                self._advertised.add(key)
                fresh.append(key)
        for key in fresh:
            self._background.start_soon(self._provide, key)
        return len(fresh)

    async def _provide(self, key: bytes, max_wait_s: float = 300.0) -> None:
        """Place the record; until some peer holds it (a new node's table may be empty), retry."""
        assert self.providers is not None
        wait_s = 1.0
        while True:
            try:
                if await self.providers.provide(key):
                    return
            except Exception as error:  # an unreachable DHT must not stop the node
                logger.info("provider record not placed key=%s error=%r", key.hex()[:16], error)
            await trio.sleep(wait_s)
            wait_s = min(max_wait_s, wait_s * 2)

    async def ask_network(self, terms: Sequence[str], timeout_s: float = 5.0,
                          max_sellers: int = 5) -> dict[str, Any]:
        """Find sellers of ``terms`` in the DHT and sync their listings, within ``timeout_s``.

        Accepted listings reach the listing handlers as gossip would; returns what happened.
        """
        started = trio.current_time()
        wanted = list(dict.fromkeys(t for t in (normalize_term(t) for t in terms) if t))[:8]
        report: dict[str, Any] = {"terms": wanted, "providers": 0, "synced": 0, "accepted": 0,
                                  "rejected": 0, "timed_out": False}
        if self.providers is None:
            report["skipped"] = "no DHT (net.discovery is off)"
            return report
        providers = self.providers
        found: dict[str, Any] = {}
        with trio.move_on_after(timeout_s) as scope:
            async with trio.open_nursery() as nursery:
                async def find(term: str) -> None:
                    for info in await providers.find(provider_key(term), max_sellers):
                        found.setdefault(str(info.peer_id), info)

                for term in wanted:
                    nursery.start_soon(find, term)
            sellers = [info for peer, info in found.items()
                       if peer != self.peer_id and not self.is_banned(peer)][:max_sellers]
            report["providers"] = len(found)
            async with trio.open_nursery() as nursery:
                async def sync(info: Any) -> None:
                    if info.addrs:
                        self.host.get_peerstore().add_addrs(info.peer_id, info.addrs[:8], 600)
                    result = await self.sync.sync_with(str(info.peer_id), every_shard=True)
                    report["synced"] += 1 if result.pages else 0
                    report["accepted"] += result.accepted
                    report["rejected"] += result.rejected

                for info in sellers:
                    nursery.start_soon(sync, info)
        report["timed_out"] = scope.cancelled_caught
        report["elapsed_ms"] = round((trio.current_time() - started) * 1000)
        self.last_network_search = report
        logger.info("network search terms=%s providers=%d synced=%d accepted=%d timed_out=%s",
                    wanted, report["providers"], report["synced"], report["accepted"],
                    report["timed_out"])
        return report

    def add_score_term(self, term: Callable[[str], float]) -> None:
        """Add ``term(peer_id)`` to every peer's gossipsub application score."""
        self._score_terms.append(term)

    def on_reject(self, hook: RejectHook) -> None:
        """``hook(Rejection)`` for every rejected gossip message (for the trust ledger)."""
        self.rejections.on_reject(hook)

    def rejection_counts(self, peer_id: str) -> dict[str, int]:
        return self.rejections.counts(peer_id)

    # ------------------------------------------------------------------ scoring
    def score(self, peer_id: str) -> float:
        return self.scores.score(peer_id)

    def _app_score(self, peer: ID) -> float:
        peer_id = str(peer)
        return self.scores.score(peer_id) + sum(term(peer_id) for term in self._score_terms)

    def sync_status(self) -> dict[str, Any]:
        """Listings sync: recent sessions per peer, pages served."""
        return {
            "protocol": str(self.sync.transport.protocol_id),
            "protocols": [str(self.sync.transport_v2.protocol_id),
                          str(self.sync.transport.protocol_id)],
            "served_pages": self.sync.served_pages,
            "cursors": dict(self.sync.cursors),
            "sessions": [dataclasses.asdict(report) for report in self.sync.reports[-16:]],
            "last_network_search": self.last_network_search,
        }

    def _penalize(self, rejection: Rejection) -> None:
        """A rejection outside gossip (listings sync): counted and scored like gossip's.

        A stalled sync costs peer score only: an honest peer that crashes mid-request
        looks the same, so it is not trust evidence (the trust ledger never hears of it).
        """
        if rejection.reason != SYNC_STALLED:
            self.rejections.record(rejection)
        self._on_rejected(rejection)

    def _on_rejected(self, rejection: Rejection) -> None:
        if rejection.peer_id in self.management_peers:
            logger.warning("management peer sent an invalid message peer=%s reason=%s",
                           rejection.peer_id, rejection.reason)
            return
        score = self.scores.penalize(rejection.peer_id, rejection.reason)
        if score < self.scores.config.ban_threshold:
            logger.warning(
                "peer score below threshold, banning peer=%s score=%.1f", rejection.peer_id, score
            )
            self.ban(rejection.peer_id)

    def ban(self, peer_id: str) -> None:
        """Cut a peer off: pubsub blacklist (graylist), disconnect, refuse it later.

        For the trust layer as well as for scoring. Lasts until ``unban``.
        """
        peer = to_peer_id(peer_id)
        if peer == self.host.get_id():
            return
        if peer_id in self.management_peers:
            logger.warning("refusing to ban management peer=%s", peer_id)
            return
        if peer not in self.peer_manager.banned:
            self.pubsub.add_to_blacklist(peer)
        self.peer_manager.ban(peer)

    def unban(self, peer_id: str) -> None:
        peer = to_peer_id(peer_id)
        self.pubsub.remove_from_blacklist(peer)
        self.scores.forget(peer_id)
        self.peer_manager.unban(peer)

    def is_banned(self, peer_id: str) -> bool:
        return to_peer_id(peer_id) in self.peer_manager.banned

    # ------------------------------------------------------------------ peers
    def peers(self) -> list[PeerStatus]:
        return self.peer_manager.peers()

    def connect(self, addr: str) -> str:
        """Keep a connection to ``addr`` (``…/p2p/<id>``), redialled when it drops."""
        return str(self.peer_manager.keep(addr))

    def network_size_estimate(self) -> int:
        """Nodes in the network, from the DHT routing table (``node.trust.cadence``); at least
        the connected peers plus us."""
        connected = len(self.host.get_connected_peers()) + 1
        if self.discovery is None:
            return connected
        table = self.discovery.dht.routing_table
        keys = [peer_id_to_key(peer) for peer in table.get_peer_ids()]
        return max(connected, dht_size_estimate(peer_id_to_key(self.host.get_id()), keys))

    def connected_peers(self) -> list[str]:
        return [str(peer) for peer in self.host.get_connected_peers()]

    def good_peers(self) -> list[saved_peers.SavedPeer]:
        """Connected peers that identify says speak our network, with their storable addresses."""
        now_ms = time.time_ns() // 1_000_000
        ours = (self.purchases.protocol_id, self.sync.transport.protocol_id,
                self.discovery.protocol_id if self.discovery is not None else "")
        good = []
        for peer in self.host.get_connected_peers():
            if peer in self.peer_manager.banned or not any(
                    protocol and speaks(self.host, peer, protocol) for protocol in ours):
                continue
            addrs: list[str] = []
            for addr in self.peer_manager.peerstore_addrs(peer):
                text = saved_peers.storable_addr(addr)
                if text is not None and text not in addrs:
                    addrs.append(text)
            if addrs:
                good.append(saved_peers.SavedPeer(str(peer), tuple(addrs[:saved_peers.MAX_ADDRS]),
                                                  now_ms))
        return good

    async def save_peers(self) -> bool:
        """Write the last good peers if they changed; True when the file was written."""
        if self.peers_path is None:
            return False
        merged = saved_peers.merge(self.saved, self.good_peers(), time.time_ns() // 1_000_000)
        key = frozenset((p.peer_id, p.addrs) for p in merged)
        # Unchanged peers are written again hourly, so their seen_ms stays current.
        if key == self._saved_key and trio.current_time() - self._saved_at < 3600:
            return False
        path, network = self.peers_path, self.network
        await trio.to_thread.run_sync(lambda: saved_peers.write(path, merged, network))
        self.saved, self._saved_key, self._saved_at = merged, key, trio.current_time()
        return True

    async def _save_peers_loop(self) -> None:
        while True:
            await trio.sleep(self.save_peers_s)
            try:
                await self.save_peers()
            except Exception as error:  # a full disk must not stop the network
                logger.warning("saving peers failed path=%s error=%r", self.peers_path, error)

    def mesh_peers(self, topic: str) -> list[str]:
        return [str(peer) for peer in self.router.mesh.get(self.gossip.wire_topic(topic), ())]

    def topic_peers(self, topic: str) -> list[str]:
        return [str(peer) for peer in self.pubsub.peer_topics.get(self.gossip.wire_topic(topic), ())]

    # ------------------------------------------------------------------ purchase
    def serve_purchases(self, handler: RequestHandler) -> None:
        self.purchases.serve(handler)

    async def request(self, peer: str, data: bytes, timeout_s: float = 30.0) -> bytes:
        return await self.purchases.request(peer, data, timeout_s)

    # ------------------------------------------------------------------ lifecycle
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with background_trio_service(self.pubsub), background_trio_service(self.router):
            await self.pubsub.wait_until_ready()
            async with self.host.run(self._listen), trio.open_nursery() as nursery:
                assert self.reachability is not None
                await nursery.start(self.reachability.run)
                await nursery.start(self.gossip.run)
                if self.shards is not None:
                    await nursery.start(self.shards.run)
                self._background = nursery
                await nursery.start(self.peer_manager.run)
                if self.discovery is not None:
                    await nursery.start(self.discovery.run)
                if self._sync_source is not None:
                    await nursery.start(self.sync.run, self.connected_peers)
                if self.peers_path is not None:
                    nursery.start_soon(self._save_peers_loop)
                logger.info("net started peer=%s addrs=%s", self.peer_id, self.listen_addrs())
                self._started.set()
                task_status.started()
                await trio.sleep_forever()

    async def wait_started(self) -> None:
        await self._started.wait()
