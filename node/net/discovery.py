"""Discovery beyond the bootstrap list: py-libp2p's Kademlia DHT, used for peer routing only.

A node that knows one peer finds the rest: every node runs a KadDHT server
(FIND_NODE under our own protocol id, ``/crystalmesh/<network>/kad/1.0.0``,
never the public IPFS DHT's ``/ipfs/kad/1.0.0``: see ``node.net.dht``), and a discovery round looks up a random key
(a "random walk"; its own id on the first round, as Kademlia's bootstrap does)
starting from the peers it is connected to. Each answer names peers closer to
the key, with their addresses (signed peer records when the peer sent one).
Discovered peers are handed to the :class:`~node.net.peers.PeerManager`, which
dials them and redials them when they drop, like bootstrap peers, up to
``max_kept`` of them; so when bootstrap nodes go away the rest stay meshed.

Gossipsub v1.1 peer exchange is on as well (``do_px`` in ``gossip_config``): a
peer that prunes us from an oversubscribed mesh (a busy bootstrap node) sends up
to 16 other peers of the topic, which the router dials.

The DHT stores no values: its record validator refuses every PUT_VALUE key (no
namespace is registered, strict). It keeps provider records (sellers of a category
or tag), bounded per provider and in all (``node.net.dht.ProviderRecords``), so a
peer cannot fill our memory through it.
Banned peers are never kept and, if a lookup dials one, the peer manager's
notifee disconnects it as it does for any banned peer.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost
from libp2p.peer.id import ID
from libp2p.tools.anyio_service import background_trio_service

from node.net import failures, libp2p_compat
from node.net.dht import build_dht
from node.net.peers import PeerManager
from protocol.topics import DHT_PROTOCOL

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DiscoveryConfig:
    enabled: bool = True
    # Rounds run every ``fast_interval_s`` while they find peers and the node has fewer
    # than ``target_peers`` connections, then back off (doubling) to ``interval_s``.
    target_peers: int = 8
    # Discovered peers the peer manager keeps (redials); bootstrap peers come on top.
    max_kept: int = 16
    interval_s: float = 30.0
    fast_interval_s: float = 2.0
    lookup_timeout_s: float = 30.0


def next_delay_s(config: DiscoveryConfig, previous_s: float, found_new: bool, connected: int) -> float:
    """Seconds to the next round: ``fast_interval_s`` again while rounds find new peers
    and the node is below ``target_peers``; otherwise doubling up to ``interval_s``
    (a small network that has been found is not walked every few seconds)."""
    if found_new and connected < config.target_peers:
        return config.fast_interval_s
    if connected >= config.target_peers:
        return config.interval_s
    return min(config.interval_s, previous_s * 2)


def dialable_addr(host: IHost, peer: ID) -> str | None:
    """A ``/…/tcp/…/p2p/<id>`` address of ``peer`` from the peerstore, or None."""
    try:
        addrs = host.get_peerstore().addrs(peer)
    except Exception:
        return None
    for addr in addrs:
        text = str(addr)
        if "/tcp/" in text and "p2p-circuit" not in text:
            return text if "/p2p/" in text else f"{text}/p2p/{peer}"
    return None


class Discovery:
    """Random-walk peer discovery over the Kademlia DHT (see module docstring)."""

    def __init__(self, host: IHost, peers: PeerManager, config: DiscoveryConfig | None = None,
                 protocol_id: str = DHT_PROTOCOL) -> None:
        self.host = host
        self.peers = peers
        self.config = config or DiscoveryConfig()
        self.protocol_id = protocol_id
        self.dht = build_dht(host, protocol_id)
        self.discovered: set[ID] = set()
        self.rounds = 0
        self._wake = trio.Event()

    def wake(self) -> None:
        """Run a round now (e.g. after a connection dropped)."""
        self._wake.set()

    async def locate(self, peer: ID) -> None:
        """Look ``peer`` up by its id, for its current addresses (e.g. after a restart on a new port).

        The FIND_NODE answers of peers connected to it carry its addresses (and
        its signed peer record when they hold one); the library adds them to the
        peerstore, where the peer manager's next attempt finds them.
        """
        with trio.move_on_after(self.config.lookup_timeout_s):
            await self.dht.peer_routing.find_closest_peers_network(peer.to_bytes())

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with background_trio_service(self.dht):
            task_status.started()
            delay_s = self.config.fast_interval_s
            while True:
                self._wake = trio.Event()
                found: list[ID] = []
                try:
                    found = await self.round()
                except Exception as error:  # a lookup failing must not end discovery
                    failures.count(failures.DHT_LOOKUP)
                    logger.debug("discovery round failed error=%r", error)
                self.peers.wake()  # a round may have brought addresses of lost peers
                delay_s = next_delay_s(self.config, delay_s, bool(found),
                                       len(self.host.get_connected_peers()))
                with trio.move_on_after(delay_s):
                    await self._wake.wait()

    async def find_addrs(self, peer: ID, ask_at_once: int = 8) -> list[multiaddr.Multiaddr]:
        """``peer``'s addresses as the network knows them now.

        py-libp2p's ``find_peer`` answers from local tables when it has anything
        (stale for a peer that has since found relays), and its iterative lookup took
        over 10 s on the simulated network. Here: one FIND_NODE for ``peer`` to each of
        up to ``ask_at_once`` directly connected peers at once (a private peer is
        connected to public ones, which learnt its relay addresses by identify push;
        their answers land in the peerstore), then the iterative lookup if that found
        nothing new.
        """
        def known_now() -> list[multiaddr.Multiaddr]:
            try:
                return list(self.host.get_peerstore().addrs(peer))
            except Exception:  # py-libp2p raises for a peer it has never heard of
                return []

        before = {str(addr) for addr in known_now()}
        asked = [p for p in self.host.get_connected_peers()
                 if p != peer and p not in self.peers.banned][:ask_at_once]

        async with trio.open_nursery() as nursery:
            async def ask(server: ID) -> None:
                try:
                    await libp2p_compat.query_peer_for_closest(self.dht.peer_routing, server,
                                                                peer.to_bytes())
                except Exception as error:
                    logger.debug("FIND_NODE %s to %s failed: %r", peer, server, error)
                if any(str(addr) not in before for addr in known_now()):
                    nursery.cancel_scope.cancel()  # an answer brought new addresses

            for server in asked:
                nursery.start_soon(ask, server)
        if not any(str(addr) not in before for addr in known_now()):
            await self.dht.peer_routing.find_closest_peers_network(peer.to_bytes())
        return known_now()

    async def round(self) -> list[ID]:
        """One random walk; returns the peers newly handed to the peer manager."""
        me = self.host.get_id()
        for peer in self.host.get_connected_peers():
            if peer not in self.peers.banned:
                await self.dht.add_peer(peer)
        target = me.to_bytes() if self.rounds == 0 else secrets.token_bytes(32)
        self.rounds += 1
        found: list[ID] = []
        with trio.move_on_after(self.config.lookup_timeout_s):
            found = await self.dht.peer_routing.find_closest_peers_network(target)
        return self._keep(found)

    def _keep(self, found: list[ID]) -> list[ID]:
        me = self.host.get_id()
        kept: list[ID] = []
        for peer in found:
            if len(self.discovered) >= self.config.max_kept:
                break
            if peer == me or peer in self.peers.banned or peer in self.discovered:
                continue
            addr = dialable_addr(self.host, peer)
            if addr is None:
                continue
            try:
                self.peers.keep(addr)
            except ValueError:
                continue
            self.discovered.add(peer)
            kept.append(peer)
        if kept:
            logger.info("discovered peers count=%d kept_total=%d", len(kept), len(self.discovered))
        return kept
