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
otherwise. When no circuit address is known the peer is looked up (DHT) at
once, since what we know may predate its relays; while nothing has connected it
is looked up again every ``LOOKUP_RETRY_S`` (``MAX_LOOKUPS`` times) and every
circuit that failed is tried again (``CIRCUIT_TRIES`` each, ``CIRCUIT_TIMEOUT_S``
each): a relay that refused because the peer was between two reservations, or
a lookup that ran out of time after its answers had filled the peerstore, no
longer ends the dial while a relayed path exists. The first connection wins;
the others are cancelled. Each dial logs its attempts (``dialling``, ``dial
attempt won/failed``, ``peer lookup``, ``dial failed/cancelled``) and marks its
steps for ``node.net.progress``.
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
from node.net import progress
from node.net.host import connect, live_connections
from node.net.reach.autonat import PRIVATE, PUBLIC, AutoNat
from node.net.reach.relay import RelayLimits, RelayProtocol
from node.net.reach.relay_client import (
    RelayClient,
    circuit_ending,
    circuit_parts,
    dial_relayed,
    is_circuit,
)

logger = logging.getLogger(__name__)

RELAY_STAGGER_S = 1.5
DCUTR_DIAL_TIMEOUT_S = 4
FIND_PEER_TIMEOUT_S = 10.0
LOOKUP_RETRY_S = 2.0
MAX_LOOKUPS = 5
CIRCUIT_TRIES = 3
CIRCUIT_TIMEOUT_S = 12.0  # the relay gives the target 10 s (relay.STOP_TIMEOUT_S)
MAX_CIRCUITS_AT_ONCE = 4
RENEW_DIAL_TIMEOUT_S = 5.0
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
    connections = live_connections(host, peer)
    if not connections:
        return None
    return "relayed" if all(_relayed(conn) for conn in connections) else "direct"


def _relayed(connection: Any) -> bool:
    try:
        return any(is_circuit(addr) for addr in connection.get_transport_addresses() or ())
    except Exception:
        return False


class _UpgradeWatcher(INotifee):
    """Counts relayed connections that gained a direct one (the DCUtR outcome) and tells the
    relay client when a connection opens or closes (it replaces a lost relay at once)."""

    def __init__(self, reachability: Reachability) -> None:
        self.reachability = reachability

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        peer = conn.muxed_conn.peer_id
        if _relayed(conn):
            self.reachability.relayed_peers.add(peer)
            return
        self.reachability.client.on_connected(peer)
        if peer in self.reachability.relayed_peers:
            self.reachability.relayed_peers.discard(peer)
            self.reachability.upgraded += 1
            metrics.HOLE_PUNCHES.labels(outcome="direct").inc()
            logger.info("relayed connection upgraded to direct peer=%s", peer)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self.reachability.client.on_disconnected(conn.muxed_conn.peer_id)

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
        """Connect to ``peer`` directly or through a relay (the caller sets the deadline).

        Connected already: nothing to do, unless the only connections are circuits their
        relays end soon (``circuit_ending``): then a fresh circuit is dialled, so the
        request about to start does not die with the old one (the swarm closes the old
        one once it carries no request, libp2p_tuning 14.)."""
        renewing = circuit_ending(self.host, peer)
        if live_connections(self.host, peer) and not renewing:
            return
        # A request is an explicit action: dial even if an earlier attempt failed
        # (py-libp2p's negative cache would refuse for a while).
        unblock = getattr(self.host.get_network(), "unblock_peer", None)
        if unblock is not None:
            unblock(peer)
        if not renewing:
            await _DialRace(self.host, peer, self.find_addrs).run(list(addrs or []))
            return
        logger.info("renewing a relayed connection whose circuit ends soon peer=%s", peer)
        # Bounded: the old connection still serves a short request if no circuit comes.
        with trio.move_on_after(RENEW_DIAL_TIMEOUT_S):
            await _DialRace(self.host, peer, self.find_addrs, renewing=True).run(list(addrs or []))


class _DialRace:
    """One ``connect``: direct and relayed attempts raced, the peer looked up again and
    failed circuits retried until one connects or every way is exhausted (module doc)."""

    def __init__(self, host: IHost, peer: ID, find_addrs: FindAddrs | None,
                 renewing: bool = False) -> None:
        self.host, self.peer, self.find_addrs = host, peer, find_addrs
        # Renewing a circuit: a direct dial would only find the connection we have.
        self.renewing = renewing
        self.tried_direct: set[str] = set()
        self.circuit_failures: dict[str, int] = {}
        self.in_flight: set[str] = set()
        self.errors: list[str] = []
        self.won = False
        self.lookups = 0
        self.started = trio.current_time()

    def _ms(self) -> int:
        return int((trio.current_time() - self.started) * 1000)

    async def run(self, addrs: list[multiaddr.Multiaddr]) -> None:
        peer = self.peer
        known = _unique(addrs + _peerstore_addrs(self.host, peer))
        has_circuits = any(is_circuit(addr) for addr in known)
        progress.step("dial", f"known addresses: {len(known)}")
        logger.info("dialling peer=%s known_direct=%d known_circuits=%d", peer,
                    sum(1 for addr in known if not is_circuit(addr)),
                    sum(1 for addr in known if is_circuit(addr)))
        try:
            async with trio.open_nursery() as nursery:
                self.launch(nursery, known, 0.0 if has_circuits else RELAY_STAGGER_S)
                # No circuit known: the peer may be private with relays we have not heard
                # of (what we know may predate them), so look it up at once.
                nursery.start_soon(self.keep_looking, nursery,
                                   RELAY_STAGGER_S if has_circuits else 0.0)
        except trio.Cancelled:
            self._log_end("dial cancelled")
            raise
        if not self.won and not live_connections(self.host, peer):
            self._log_end("dial failed")
            if not self.tried_direct and not self.circuit_failures:
                raise Unreachable(f"no known address for {peer}")
            raise Unreachable(f"cannot connect to {peer}: {'; '.join(self.errors[-6:]) or 'no route'}")

    def _log_end(self, what: str) -> None:
        logger.info("%s peer=%s after_ms=%d direct=%d circuits=%d lookups=%d errors=%s", what,
                    self.peer, self._ms(), len(self.tried_direct), len(self.circuit_failures),
                    self.lookups, self.errors[-6:])

    def launch(self, nursery: trio.Nursery, found: list[multiaddr.Multiaddr],
               relay_delay_s: float) -> None:
        """Dial what is new among ``found``, and the circuits that may work on another try."""
        direct = [] if self.renewing else [
            addr for addr in _unique(found) if not is_circuit(addr) and str(addr) not in self.tried_direct]
        if direct:
            self.tried_direct.update(str(addr) for addr in direct)
            nursery.start_soon(self.attempt, _bind(connect, self.host, PeerInfo(self.peer, direct)),
                               0.0, nursery.cancel_scope, f"direct({len(direct)})", None)
        circuits = [_circuit_to(addr, self.peer) for addr in _unique(found) if is_circuit(addr)]
        ready = [circuit for circuit in circuits if str(circuit) not in self.in_flight
                 and self.circuit_failures.get(str(circuit), 0) < CIRCUIT_TRIES]
        for index, circuit in enumerate(ready[:MAX_CIRCUITS_AT_ONCE]):
            self.in_flight.add(str(circuit))
            self.circuit_failures.setdefault(str(circuit), 0)
            nursery.start_soon(self.attempt, _bind(_dial_circuit, self.host, circuit),
                               relay_delay_s + 0.25 * index, nursery.cancel_scope,
                               f"relay({circuit_parts(circuit)[1]})", str(circuit))

    async def attempt(self, dial: Callable[[], Awaitable[Any]], delay_s: float,
                      done: trio.CancelScope, how: str, circuit: str | None) -> None:
        try:
            await trio.sleep(delay_s)
            progress.step("circuit" if circuit else "dial", how)
            try:
                await dial()
            except Exception as error:
                self.errors.append(f"{how}: {str(error)[:200]}")
                if circuit is not None:
                    self.circuit_failures[circuit] = self.circuit_failures.get(circuit, 0) + 1
                logger.info("dial attempt failed peer=%s how=%s after_ms=%d error=%s", self.peer,
                            how, self._ms(), str(error)[:200])
                return
        finally:
            if circuit is not None:
                self.in_flight.discard(circuit)
        self.won = True
        logger.info("dial attempt won peer=%s how=%s after_ms=%d", self.peer, how, self._ms())
        done.cancel()

    async def keep_looking(self, nursery: trio.Nursery, first_delay_s: float) -> None:
        """Look the peer up (our addresses may predate its relays) and retry what failed,
        ``MAX_LOOKUPS`` times, ``LOOKUP_RETRY_S`` apart, while nothing has connected."""
        delay_s = first_delay_s
        for _ in range(MAX_LOOKUPS):
            await trio.sleep(delay_s)
            delay_s = LOOKUP_RETRY_S
            found: list[multiaddr.Multiaddr] = []
            if self.find_addrs is not None:
                progress.step("lookup")
                self.lookups += 1
                with trio.move_on_after(FIND_PEER_TIMEOUT_S):
                    try:
                        found = await self.find_addrs(self.peer)
                    except Exception as error:
                        logger.debug("DHT lookup of %s failed: %r", self.peer, error)
            # What the answers put in the peerstore counts even when the lookup ran out
            # of time before returning it.
            found = _unique(found + _peerstore_addrs(self.host, self.peer))
            logger.info("peer lookup peer=%s after_ms=%d found=%d circuits=%d", self.peer,
                        self._ms(), len(found), sum(1 for addr in found if is_circuit(addr)))
            self.launch(nursery, found, 0.0)


async def _dial_circuit(host: IHost, circuit: multiaddr.Multiaddr) -> None:
    """``dial_relayed`` bounded: a relay that never answers is retried, not waited on."""
    try:
        with trio.fail_after(CIRCUIT_TIMEOUT_S):
            await dial_relayed(host, circuit)
    except trio.TooSlowError as error:
        raise Unreachable(f"no answer through {circuit} within {CIRCUIT_TIMEOUT_S} s") from error


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
