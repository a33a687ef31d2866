"""Reachability: nodes behind NAT can sell, buy and sync like public ones.

One object per node ties four parts together (each in its own module):

- ``autonat``: is this node public, private, or unknown yet?
- ``relay``: a public node offers circuit relay v2 (``net.relay_service``:
  ``auto`` = while public, ``on``, ``off``), every resource bounded.
- ``relay_client``: a private node holds reservations on
  ``net.relay_reservations`` relays and advertises a ``/p2p-circuit``
  address through each (the host's addresses: identify, identify push, the
  DHT's answers and signed peer records carry them).
- DCUtR (py-libp2p's ``DCUtRProtocol``, ``net.hole_punching``): a relayed
  connection is upgraded to a direct one — a reverse dial when one side is
  public, a TCP simultaneous open from the listen port when both are behind
  port-preserving NATs. The relayed connection is closed after a grace period.

``connect(peer)`` is how every request/response protocol reaches a peer:
the known addresses, direct and relayed raced — relayed ones at once when the
peer advertises them (it says it is private), after ``RELAY_STAGGER_S``
otherwise — and, at once when nothing is known or ``RELAY_STAGGER_S`` later,
a DHT lookup whose new addresses join the race (what we know may predate
the peer's relays). The first connection wins; the others are cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.relay.circuit_v2.dcutr import DCUtRProtocol
from libp2p.tools.anyio_service import background_trio_service

from node import metrics
from node.config import ConfigError, NetConfig
from node.net.reach.autonat import PRIVATE, PUBLIC, AutoNat
from node.net.reach.relay import RelayLimits, RelayProtocol
from node.net.reach.relay_client import RelayClient, dial_relayed, is_circuit

logger = logging.getLogger(__name__)

RELAY_STAGGER_S = 1.5
DCUTR_DIAL_TIMEOUT_S = 4
FIND_PEER_TIMEOUT_S = 10.0
RELAY_MODES = ("auto", "on", "off")

FindAddrs = Callable[[ID], Awaitable[list[multiaddr.Multiaddr]]]


class Unreachable(ConnectionError):
    """No direct or relayed connection to the peer could be made."""


@dataclass(frozen=True)
class ReachabilityConfig:
    relay_service: str = NetConfig.relay_service
    relay_reservations: int = NetConfig.relay_reservations
    relay_limits: RelayLimits = field(default_factory=RelayLimits)
    hole_punching: bool = NetConfig.hole_punching
    autonat_confirmations: int = NetConfig.autonat_confirmations

    def __post_init__(self) -> None:
        if self.relay_service not in RELAY_MODES:
            raise ConfigError(f"net.relay_service must be one of {', '.join(RELAY_MODES)}, "
                              f"got {self.relay_service!r}")

    @classmethod
    def from_config(cls, config: NetConfig) -> ReachabilityConfig:
        return cls(
            relay_service=config.relay_service,
            relay_reservations=config.relay_reservations,
            relay_limits=RelayLimits.from_config(config),
            hole_punching=config.hole_punching,
            autonat_confirmations=config.autonat_confirmations,
        )


def connection_kind(host: IHost, peer: ID) -> str | None:
    """``direct`` if any connection to ``peer`` is direct, ``relayed`` if all are, else None."""
    connections = host.get_network().connections.get(peer, []) or []
    if not connections:
        return None
    return "relayed" if all(_relayed(conn) for conn in connections) else "direct"


def _relayed(connection: Any) -> bool:
    try:
        return any(is_circuit(addr) for addr in connection.get_transport_addresses() or ())
    except Exception:
        return False


class _UpgradeWatcher(INotifee):
    """Counts relayed connections that gained a direct one (the DCUtR outcome)."""

    def __init__(self, reachability: Reachability) -> None:
        self.reachability = reachability

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        peer = conn.muxed_conn.peer_id
        if _relayed(conn):
            self.reachability.relayed_peers.add(peer)
        elif peer in self.reachability.relayed_peers:
            self.reachability.relayed_peers.discard(peer)
            self.reachability.upgraded += 1
            metrics.HOLE_PUNCHES.labels(outcome="direct").inc()
            logger.info("relayed connection upgraded to direct peer=%s", peer)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        pass

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def listen(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        pass

    async def listen_close(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        pass


class Reachability:
    def __init__(self, host: IHost, config: ReachabilityConfig | None = None,
                 is_banned: Callable[[ID], bool] = lambda peer: False,
                 autonat_addrs: Callable[[], list[multiaddr.Multiaddr]] | None = None,
                 find_addrs: FindAddrs | None = None) -> None:
        """``find_addrs``: fresh addresses of a peer from the network (the DHT), if any."""
        self.host = host
        self.config = config or ReachabilityConfig()
        self.is_banned = is_banned
        self.find_addrs = find_addrs
        self.protocol = RelayProtocol(host, self.config.relay_limits, is_banned)
        self.autonat = AutoNat(host, self.config.autonat_confirmations, addrs=autonat_addrs,
                               on_change=self._on_status)
        self.client = RelayClient(host, self.protocol, self.config.relay_reservations,
                                  is_banned, on_change=self._on_addrs_changed)
        # 4 s per dial instead of 10: the first upgrade step dials the peer's advertised
        # direct addresses, which for a private peer are LAN addresses that never answer.
        self.dcutr = DCUtRProtocol(host, dial_timeout=DCUTR_DIAL_TIMEOUT_S) \
            if self.config.hole_punching else None
        self.relayed_peers: set[ID] = set()
        self.upgraded = 0
        self._nursery: trio.Nursery | None = None
        host.get_network().register_notifee(_UpgradeWatcher(self))

    # ------------------------------------------------------------------ addresses
    def extra_addrs(self) -> list[multiaddr.Multiaddr]:
        """Addresses the host advertises besides its listen addresses (our circuits)."""
        return self.client.circuit_addrs()

    def _on_addrs_changed(self) -> None:
        nursery = self._nursery
        push = getattr(self.host, "_push_identify_to_all_peers", None)
        if nursery is not None and push is not None:
            nursery.start_soon(push)  # identify push: peers learn our circuit addresses

    def _on_status(self, status: str) -> None:
        if self.config.relay_service == "auto":
            self.protocol.serve(status == PUBLIC)
        self.client.wake()

    # ------------------------------------------------------------------ status
    @property
    def status(self) -> str:
        return self.autonat.reachability

    def describe(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "relay_service": self.config.relay_service,
            "relay": self.protocol.status(),
            "reservations": sorted(str(relay) for relay in self.client.reservations),
            "circuit_addrs": [f"{addr}/p2p/{self.host.get_id()}" for addr in self.extra_addrs()],
            "hole_punching": self.dcutr is not None,
            "upgraded_to_direct": self.upgraded,
        }

    def kind(self, peer: ID) -> str | None:
        return connection_kind(self.host, peer)

    # ------------------------------------------------------------------ lifecycle
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with background_trio_service(self.protocol), trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.config.relay_service == "on":
                self.protocol.serve(True)
            if self.dcutr is not None:
                await nursery.start(self._run_dcutr)
            await nursery.start(self.autonat.run)
            await nursery.start(self.client.run, lambda: self.status == PRIVATE)
            task_status.started()

    async def _run_dcutr(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        assert self.dcutr is not None
        async with background_trio_service(self.dcutr):
            task_status.started()
            await trio.sleep_forever()

    # ------------------------------------------------------------------ dialling
    async def connect(self, peer: ID, addrs: list[multiaddr.Multiaddr] | None = None) -> None:
        """Connect to ``peer`` directly or through a relay (the caller sets the deadline)."""
        if self.host.get_network().connections.get(peer):
            return
        # A request is an explicit action: dial even if an earlier attempt failed
        # (py-libp2p's negative cache would refuse for a while).
        unblock = getattr(self.host.get_network(), "unblock_peer", None)
        if unblock is not None:
            unblock(peer)
        tried: set[str] = set()
        errors: list[str] = []
        won = False

        async def attempt(dial: Callable[[], Awaitable[Any]], delay_s: float,
                          done: trio.CancelScope) -> None:
            nonlocal won
            await trio.sleep(delay_s)
            try:
                await dial()
            except Exception as error:
                errors.append(str(error)[:200])
                return
            won = True
            done.cancel()

        def launch(nursery: trio.Nursery, found: list[multiaddr.Multiaddr],
                   relay_delay_s: float) -> None:
            fresh = [addr for addr in _unique(found) if str(addr) not in tried]
            tried.update(str(addr) for addr in fresh)
            direct = [addr for addr in fresh if not is_circuit(addr)]
            circuits = [_circuit_to(addr, peer) for addr in fresh if is_circuit(addr)]
            if direct:
                nursery.start_soon(attempt, _bind(self.host.connect, PeerInfo(peer, direct)),
                                   0.0, nursery.cancel_scope)
            for index, circuit in enumerate(circuits[:4]):
                nursery.start_soon(attempt, _bind(dial_relayed, self.host, circuit),
                                   relay_delay_s + 0.25 * index, nursery.cancel_scope)

        async def look_up(nursery: trio.Nursery, delay_s: float) -> None:
            """Fresh addresses from the network: ours may predate the peer's relays."""
            assert self.find_addrs is not None
            await trio.sleep(delay_s)
            found: list[multiaddr.Multiaddr] = []
            with trio.move_on_after(FIND_PEER_TIMEOUT_S):
                try:
                    found = await self.find_addrs(peer)
                except Exception as error:
                    logger.debug("DHT lookup of %s failed: %r", peer, error)
            launch(nursery, found, 0.0)

        known = list(addrs or []) + _peerstore_addrs(self.host, peer)
        has_circuits = any(is_circuit(addr) for addr in known)
        async with trio.open_nursery() as nursery:
            launch(nursery, known, 0.0 if has_circuits else RELAY_STAGGER_S)
            if self.find_addrs is not None:
                nursery.start_soon(look_up, nursery, RELAY_STAGGER_S if known else 0.0)
        if not won and not self.host.get_network().connections.get(peer):
            if not tried:
                raise Unreachable(f"no known address for {peer}")
            raise Unreachable(f"cannot connect to {peer}: {'; '.join(errors) or 'no route'}")


def _bind(fn: Callable[..., Awaitable[Any]], *args: Any) -> Callable[[], Awaitable[Any]]:
    return lambda: fn(*args)


def _peerstore_addrs(host: IHost, peer: ID) -> list[multiaddr.Multiaddr]:
    try:
        return list(host.get_peerstore().addrs(peer))
    except Exception:
        return []


def _unique(addrs: list[multiaddr.Multiaddr]) -> list[multiaddr.Multiaddr]:
    seen: set[str] = set()
    out = []
    for addr in addrs:
        if str(addr) not in seen:
            seen.add(str(addr))
            out.append(addr)
    return out


def _circuit_to(addr: multiaddr.Multiaddr, peer: ID) -> multiaddr.Multiaddr:
    """A circuit address ending in ``/p2p/<peer>`` (identify may send it without)."""
    text = str(addr)
    if text.endswith("/p2p-circuit"):
        return multiaddr.Multiaddr(f"{text}/p2p/{peer}")
    return addr
