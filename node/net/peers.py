"""Which peers we keep connections to, and which we refuse.

- Bootstrap peers (and peers added with ``connect``) are *kept*: when the
  connection drops they are redialled with exponential backoff
  (1 s, 2 s, 4 s … capped at ``max_backoff_s``, with ±10 % jitter).
- Banned peers are disconnected, blacklisted in pubsub, never redialled, and
  disconnected again if they dial us (py-libp2p has no connection gater for
  peer ids, so a network notifee does it).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from node.net.reach import connection_kind

from .host import peer_info_from_addr

logger = logging.getLogger(__name__)


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
    ) -> None:
        self.host = host
        self.score_of = score_of
        self.max_backoff_s = max_backoff_s
        self.initial_backoff_s = initial_backoff_s
        self.dial_timeout_s = dial_timeout_s
        self.banned: set[ID] = set()
        # Connections from banned peers closed on arrival (py-libp2p has no
        # peer-id gater: they live for a few ms, their gossip is dropped by the
        # pubsub blacklist meanwhile).
        self.refused_connections = 0
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

    def is_connected(self, peer: ID) -> bool:
        return bool(self.host.get_network().connections.get(peer))

    # ------------------------------------------------------------------- loops
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._disconnect_loop)
            task_status.started()
            await self._reconnect_loop(nursery)

    async def _disconnect_loop(self) -> None:
        async for peer in self._disconnect_receive:
            try:
                await self.host.disconnect(peer)
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
                if entry.next_attempt <= now:
                    dialling.add(peer)
                    nursery.start_soon(self._dial, peer, entry, dialling)
                else:
                    next_due = min(next_due, entry.next_attempt)
            with trio.move_on_at(next_due):
                await self._wake.wait()

    async def _dial(self, peer: ID, entry: _Kept, dialling: set[ID]) -> None:
        try:
            with trio.fail_after(self.dial_timeout_s):
                await self.host.connect(entry.info)
        except Exception as error:  # any dial failure means: try again later
            entry.failures += 1
            entry.last_error = f"{type(error).__name__}: {error}"
            delay = entry.backoff_s * random.uniform(0.9, 1.1)
            entry.next_attempt = trio.current_time() + delay
            entry.backoff_s = min(entry.backoff_s * 2, self.max_backoff_s)
            logger.info(
                "dial failed peer=%s failures=%d retry_in_s=%.1f error=%s",
                peer,
                entry.failures,
                delay,
                entry.last_error,
            )
        else:
            entry.failures = 0
            entry.backoff_s = self.initial_backoff_s
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
