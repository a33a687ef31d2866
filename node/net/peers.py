"""Which peers we keep connections to, and which we refuse.

- Bootstrap peers (and peers added with ``connect``) are *kept*: when the
  connection drops they are redialled with exponential backoff
  (1 s, 2 s, 4 s … capped at ``max_backoff_s``, with ±10 % jitter). A dial that
  connects resets the backoff only once its connection has lived
  ``STABLE_CONNECTION_S``: a peer that drops us on arrival (it banned us) is
  redialled ever more slowly, not in a loop.
- Banned peers are disconnected, blacklisted in pubsub, never redialled, and
  disconnected again if they dial us (py-libp2p has no connection gater for
  peer ids, so a network notifee does it).

Churn (a kept peer restarts on a new port). py-libp2p 0.8.1 dials a peer on
one TCP address, the first its peerstore lists, which is the oldest one; and
after a dial fails it refuses to dial the peer at all for 60 s (a negative
cache). Both would keep a restarted peer unreachable. So each attempt here
dials the peer's known addresses one by one, freshest first and those that
already failed last (``_addresses``), lifting the negative cache first (our
backoff is the rate limit). Fresh addresses come from identify and signed
peer records when any peer talks to us about it, and from a DHT lookup of the
peer's id (``locate``, run for every kept peer that cannot be reached, every
``relocate_interval_s``); an address not tried yet is dialled at once rather
than after the backoff.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.net import failures
from node.net.host import connect, disconnect, live_connections, peer_info_from_addr
from node.net.reach import connection_kind

logger = logging.getLogger(__name__)

# Addresses tried per attempt, and the least time between attempts on one peer
# when fresh addresses appear (a DHT peer feeding addresses cannot make us spin).
MAX_DIAL_ADDRS = 4
MIN_ATTEMPT_GAP_S = 1.0
# A connection that lived this long was a good one: its loss redials at the initial backoff.
STABLE_CONNECTION_S = 10.0
ADDR_TTL_S = 600
Locate = Callable[[ID], Awaitable[None]]


@dataclass(frozen=True)
class PeerStatus:
    peer_id: str
    addrs: tuple[str, ...]
    connected: bool
    score: float
    banned: bool = False
    kept: bool = False
    # Connected through a relay only (no direct connection yet: see node.net.reach.reachability).
    relayed: bool = False


@dataclass
class _Kept:
    info: PeerInfo
    backoff_s: float
    next_attempt: float = 0.0
    failures: int = 0
    last_error: str = ""
    addrs: list[str] = field(default_factory=list)
    # Addresses (without /p2p/) that failed since the last successful dial.
    tried: set[str] = field(default_factory=set)
    last_attempt: float = float("-inf")
    # When our last dial connected (None once its loss was seen).
    connected_at: float | None = None


class _Watcher(INotifee):
    """Network notifee: wake the reconnect loop on disconnect, refuse banned peers."""

    def __init__(self, manager: PeerManager) -> None:
        self.manager = manager

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        peer = conn.muxed_conn.peer_id
        if peer in self.manager.banned:
            self.manager.refused_connections += 1
            self.manager.request_disconnect(peer)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self.manager.wake()

    async def listen(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        pass

    async def listen_close(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        pass


class PeerManager:
    def __init__(
        self,
        host: IHost,
        bootstrap: list[str],
        score_of: Callable[[str], float],
        max_backoff_s: float = 30.0,
        initial_backoff_s: float = 1.0,
        dial_timeout_s: float = 10.0,
        relocate_interval_s: float = 5.0,
        locate: Locate | None = None,
    ) -> None:
        """``await locate(peer)``: look the peer up by id (the DHT), filling the peerstore;
        None when the node has no DHT."""
        self.host = host
        self.relocate_interval_s = relocate_interval_s
        self.locate = locate
        self.score_of = score_of
        self.max_backoff_s = max_backoff_s
        self.initial_backoff_s = initial_backoff_s
        self.dial_timeout_s = dial_timeout_s
        self.banned: set[ID] = set()
        # Connections from banned peers closed on arrival (py-libp2p has no
        # peer-id gater: they live for a few ms, their gossip is dropped by the
        # pubsub blacklist meanwhile).
        self.refused_connections = 0
        self.dial_attempts = 0  # dials of kept peers by the reconnect loop
        self._kept: dict[ID, _Kept] = {}
        self._wake = trio.Event()
        self._disconnect_send, self._disconnect_receive = trio.open_memory_channel[ID](1024)
        for addr in bootstrap:
            self.keep(addr)
        host.get_network().register_notifee(_Watcher(self))

    # ----------------------------------------------------------------- control
    def keep(self, addr: str) -> ID:
        """Dial ``addr`` (``…/p2p/<id>``) now and whenever its connection drops."""
        info = peer_info_from_addr(addr)
        if info.peer_id == self.host.get_id():
            return info.peer_id
        entry = self._kept.get(info.peer_id)
        if entry is None:
            self._kept[info.peer_id] = _Kept(info, self.initial_backoff_s, addrs=[addr])
        else:
            entry.info = info
            entry.next_attempt = 0.0
            if addr not in entry.addrs:
                entry.addrs.append(addr)
        self.wake()
        return info.peer_id

    def wake(self) -> None:
        self._wake.set()

    def request_disconnect(self, peer: ID) -> None:
        try:
            self._disconnect_send.send_nowait(peer)
        except trio.WouldBlock:
            logger.warning("disconnect queue full, peer=%s", peer)

    def ban(self, peer: ID) -> None:
        self.banned.add(peer)
        self.request_disconnect(peer)

    def unban(self, peer: ID) -> None:
        self.banned.discard(peer)
        self.wake()

    def backoff_s(self, peer: ID) -> float | None:
        """How long the next redial of kept ``peer`` will wait after a failure or a
        short-lived connection (None: not kept)."""
        entry = self._kept.get(peer)
        return entry.backoff_s if entry is not None else None

    def is_connected(self, peer: ID) -> bool:
        return bool(live_connections(self.host, peer))

    # ------------------------------------------------------------------- loops
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._disconnect_loop)
            nursery.start_soon(self._relocate_loop)
            task_status.started()
            await self._reconnect_loop(nursery)

    def unreachable(self) -> list[ID]:
        """Kept peers we are not connected to and failed to dial at least once."""
        return [peer for peer, entry in self._kept.items()
                if entry.failures and peer not in self.banned and not self.is_connected(peer)]

    async def _relocate_loop(self) -> None:
        while True:
            await trio.sleep(self.relocate_interval_s)
            locate = self.locate
            lost = self.unreachable()
            if locate is None or not lost:
                continue
            async with trio.open_nursery() as nursery:
                for peer in lost[:8]:
                    nursery.start_soon(self._locate_one, locate, peer)
            self.wake()

    @staticmethod
    async def _locate_one(locate: Locate, peer: ID) -> None:
        try:
            await locate(peer)
        except Exception as error:
            logger.debug("lookup of peer=%s failed error=%r", peer, error)

    async def _disconnect_loop(self) -> None:
        async for peer in self._disconnect_receive:
            try:
                await disconnect(self.host, peer)
            except Exception as error:
                logger.debug("disconnect failed peer=%s error=%s", peer, error)

    async def _reconnect_loop(self, nursery: trio.Nursery) -> None:
        dialling: set[ID] = set()
        while True:
            self._wake = trio.Event()
            now = trio.current_time()
            next_due = now + self.max_backoff_s
            for peer, entry in self._kept.items():
                if peer in self.banned or peer in dialling or self.is_connected(peer):
                    continue
                if entry.connected_at is not None:
                    self._lost(entry, now, lived=now - entry.connected_at)
                if entry.next_attempt <= now or (
                        now - entry.last_attempt >= MIN_ATTEMPT_GAP_S and self._fresh(peer, entry)):
                    dialling.add(peer)
                    nursery.start_soon(self._dial, peer, entry, dialling)
                else:
                    next_due = min(next_due, entry.next_attempt)
            with trio.move_on_at(next_due):
                await self._wake.wait()

    def _lost(self, entry: _Kept, now: float, lived: float) -> None:
        """The connection our last dial made is gone after ``lived`` seconds: redial at once
        if it lived long, else back off (the peer refuses us on arrival, or the link cannot
        hold a connection)."""
        entry.connected_at = None
        if lived >= STABLE_CONNECTION_S:
            entry.backoff_s = self.initial_backoff_s
            return
        entry.next_attempt = now + entry.backoff_s * random.uniform(0.9, 1.1)
        entry.backoff_s = min(entry.backoff_s * 2, self.max_backoff_s)

    def peerstore_addrs(self, peer: ID) -> list[str]:
        """What the peerstore knows of ``peer``'s addresses (identify, DHT, our dials)."""
        try:
            return [str(addr) for addr in self.host.get_peerstore().addrs(peer)]
        except Exception:
            return []

    def _addresses(self, peer: ID, entry: _Kept) -> list[str]:
        """Addresses to try, freshest first (peerstore newest first, then kept), failed ones last."""
        known: list[str] = []
        for addr in [*reversed(self.peerstore_addrs(peer)), *reversed(entry.addrs)]:
            text = addr.split("/p2p/", 1)[0] if "p2p-circuit" not in addr else ""
            if text and text not in known:
                known.append(text)
        fresh = [addr for addr in known if addr not in entry.tried]
        return (fresh + [addr for addr in known if addr in entry.tried])[:MAX_DIAL_ADDRS]

    def _fresh(self, peer: ID, entry: _Kept) -> bool:
        """The peerstore learned an address of ``peer`` that we have not tried since it failed."""
        return bool(entry.failures) and any(
            addr.split("/p2p/", 1)[0] not in entry.tried
            for addr in self.peerstore_addrs(peer) if "p2p-circuit" not in addr)

    async def _connect(self, peer: ID, entry: _Kept) -> None:
        """Dial ``peer`` on each of its addresses in turn until one connects."""
        network = self.host.get_network()
        peerstore = self.host.get_peerstore()
        error: Exception = ConnectionError(f"no known address for {peer}")
        for text in self._addresses(peer, entry):
            address = multiaddr.Multiaddr(text)
            # Our backoff is the rate limit; the library's 60 s negative cache would
            # refuse a restarted peer we just learned the new address of.
            unblock = getattr(network, "unblock_peer", None)
            if unblock is not None:
                unblock(peer)
            # The library dials the first TCP address its peerstore lists: make it this one.
            others = [multiaddr.Multiaddr(a) for a in self.peerstore_addrs(peer)
                      if a.split("/p2p/", 1)[0] != text]
            peerstore.clear_addrs(peer)
            peerstore.add_addrs(peer, [address, *others], ADDR_TTL_S)
            try:
                with trio.fail_after(self.dial_timeout_s):
                    await connect(self.host, PeerInfo(peer, [address]))
            except Exception as failure:
                entry.tried.add(text)
                error = failure
                continue
            entry.tried.clear()
            return
        raise error

    async def _dial(self, peer: ID, entry: _Kept, dialling: set[ID]) -> None:
        entry.last_attempt = trio.current_time()
        self.dial_attempts += 1
        try:
            await self._connect(peer, entry)
        except Exception as error:  # any dial failure means: try again later
            entry.failures += 1
            entry.last_error = f"{type(error).__name__}: {error}"
            delay = entry.backoff_s * random.uniform(0.9, 1.1)
            entry.next_attempt = trio.current_time() + delay
            entry.backoff_s = min(entry.backoff_s * 2, self.max_backoff_s)
            failures.count(failures.DIAL)
            logger.debug(
                "dial failed peer=%s failures=%d retry_in_s=%.1f error=%s",
                peer,
                entry.failures,
                delay,
                entry.last_error,
            )
        else:
            entry.failures = 0
            entry.connected_at = trio.current_time()
            entry.next_attempt = 0.0
            logger.info("connected peer=%s", peer)
        finally:
            dialling.discard(peer)
            self.wake()

    # ------------------------------------------------------------------ status
    def peers(self) -> list[PeerStatus]:
        network = self.host.get_network()
        peerstore = self.host.get_peerstore()
        known: set[ID] = set(network.connections) | set(self._kept) | self.banned
        statuses = []
        for peer in sorted(known, key=str):
            try:
                addrs = tuple(str(addr) for addr in peerstore.addrs(peer))
            except Exception:
                addrs = ()
            if not addrs and peer in self._kept:
                addrs = tuple(self._kept[peer].addrs)
            statuses.append(
                PeerStatus(
                    peer_id=str(peer),
                    addrs=addrs,
                    connected=self.is_connected(peer),
                    score=self.score_of(str(peer)),
                    banned=peer in self.banned,
                    kept=peer in self._kept,
                    relayed=connection_kind(self.host, peer) == "relayed",
                )
            )
        return statuses
