"""The relay client: reservations a private node holds, and dialling through relays.

A private node (AutoNAT says nobody can dial it) keeps reservations on
``wanted`` relays (two by default, so one relay going away does not make it
unreachable). Relays are chosen among the peers it is directly connected to
that accept a reservation (a peer without the hop protocol, or that refuses,
is not asked again for ``RETRY_S``). Each reservation is refreshed halfway
through its lifetime and dropped when its relay disconnects; the loop then
finds another. The node advertises one ``<relay addr>/p2p/<relay>/p2p-circuit``
address per reservation (``circuit_addrs``): ``node.net.reach.reachability`` puts
them in the host's addresses, so identify, identify push, the DHT's peer
answers and signed peer records carry them.

Dialling: py-libp2p's swarm never dials ``/p2p-circuit`` addresses, and its
``CircuitV2Transport.dial`` first tries every stored circuit address in turn
without a timeout and makes a reservation before each CONNECT when it is a
client. ``dial_relayed`` does the one exchange that is needed (connect to the
relay, HOP CONNECT, upgrade the stream to a Noise + yamux connection) under
one deadline.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost
from libp2p.connection_types import ConnectionType
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.relay.circuit_v2.config import RelayConfig, RelayRole
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage
from libp2p.relay.circuit_v2.pb.circuit_pb2 import PeerId as CircuitPeerId
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode
from libp2p.relay.circuit_v2.transport import CircuitV2Transport
from libp2p.relay.circuit_v2.utils import read_delimited_msg, write_delimited_msg

from node import metrics
from node.net import libp2p_compat
from node.net.reach.relay import HOP_PROTOCOL_ID, RelayProtocol

logger = logging.getLogger(__name__)

RETRY_S = 300.0
POLL_S = 5.0
# A relayed connection whose circuit ends (the relay's duration limit) within this many
# seconds is not given a new request: a fresh circuit is dialled first (``circuit_ending``).
RENEW_BEFORE_END_S = 30.0
RESERVE_TIMEOUT_S = 10.0
ADDRS_PER_RELAY = 2


# When the relay ends each relayed connection we dialled (trio clock), from its HOP STATUS limit.
_circuit_ends: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def circuit_ending(host: IHost, peer: ID, within_s: float | None = None) -> bool:
    """True when every open connection to ``peer`` is a circuit we dialled that its relay ends
    within ``within_s`` (``RENEW_BEFORE_END_S``): a request started now could be cut mid-way."""
    within_s = RENEW_BEFORE_END_S if within_s is None else within_s
    connections = [connection for connection in host.get_network().connections.get(peer, []) or []
                   if not getattr(connection, "is_closed", False)]
    if not connections:
        return False
    now = trio.current_time()
    for connection in connections:
        ends = _circuit_ends.get(connection)
        if ends is None or ends - now > within_s:
            return False
    return True


class RelayDialError(ConnectionError):
    """A connection through a relay could not be made (relay down, refused, no reservation)."""


def is_circuit(addr: Any) -> bool:
    return "/p2p-circuit" in str(addr)


def circuit_parts(addr: multiaddr.Multiaddr) -> tuple[multiaddr.Multiaddr, ID, ID]:
    """``<relay addr>/p2p/<relay>/p2p-circuit/p2p/<target>`` -> (relay addr, relay, target)."""
    text = str(addr)
    before, _, after = text.partition("/p2p-circuit")
    relay_addr = multiaddr.Multiaddr(before)
    relay = relay_addr.get_peer_id()
    target = after.rpartition("/p2p/")[2] if "/p2p/" in after else ""
    if not relay or not target:
        raise ValueError(f"not a circuit address with both peer ids: {text}")
    return relay_addr, ID.from_base58(relay), ID.from_base58(target)


def direct_addrs(host: IHost, peer: ID) -> list[multiaddr.Multiaddr]:
    try:
        return [addr for addr in host.get_peerstore().addrs(peer) if not is_circuit(addr)]
    except Exception:
        return []


def _directly_connected(host: IHost, peer: ID) -> bool:
    for connection in host.get_network().connections.get(peer, []) or []:
        if getattr(connection, "is_closed", False):
            continue
        try:
            addrs = connection.get_transport_addresses()
        except Exception:
            addrs = []
        if not any(is_circuit(addr) for addr in addrs):
            return True
    return False


class RelayClient:
    def __init__(self, host: IHost, protocol: RelayProtocol, wanted: int = 2,
                 is_banned: Callable[[ID], bool] = lambda peer: False,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self.host = host
        self.wanted = wanted
        self.is_banned = is_banned
        self.on_change = on_change
        # Used for its reservation exchange only (STOP role: no reservation per dial).
        self._transport = CircuitV2Transport(host, protocol, RelayConfig(roles=RelayRole.STOP))
        self.reservations: dict[ID, float] = {}  # relay -> expires at (unix s)
        self._refresh_at: dict[ID, float] = {}
        self._not_before: dict[ID, float] = {}
        self._wake = trio.Event()
        # Rounds run on events (a relay lost, a peer connected while we hold too few, the
        # AutoNAT verdict); the poll is only the backstop (refreshes, retries).
        self.poll_s = POLL_S

    # ------------------------------------------------------------------ addresses
    def circuit_addrs(self) -> list[multiaddr.Multiaddr]:
        """Our addresses through the relays we hold reservations on (without ``/p2p/<us>``)."""
        out: list[multiaddr.Multiaddr] = []
        for relay in self.reservations:
            for addr in direct_addrs(self.host, relay)[:ADDRS_PER_RELAY]:
                base = str(addr).split("/p2p/")[0]
                out.append(multiaddr.Multiaddr(f"{base}/p2p/{relay}/p2p-circuit"))
        return out

    def wake(self) -> None:
        self._wake.set()

    def on_disconnected(self, peer: ID) -> None:
        """A connection closed: a relay we hold a reservation on may be gone; replace it now
        (the peers that dial us must not find a dead circuit address)."""
        if peer in self.reservations:
            self.wake()

    def on_connected(self, peer: ID) -> None:
        """A direct connection opened: a relay candidate, if we hold fewer than ``wanted``."""
        if len(self.reservations) < self.wanted and not self.is_banned(peer):
            self.wake()

    # ------------------------------------------------------------------ reservations
    async def run(self, active: Callable[[], bool], task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Hold ``wanted`` reservations while ``active()`` (the node is private)."""
        task_status.started()
        while True:
            self._wake = trio.Event()
            try:
                changed = await self._round(active())
            except Exception as error:  # a relay misbehaving must not end the loop
                logger.debug("relay reservation round failed: %r", error)
                changed = False
            if changed:
                self.on_change()
            with trio.move_on_after(self.poll_s):
                await self._wake.wait()

    async def _round(self, active: bool) -> bool:
        now = time.time()
        gone = [relay for relay, expires in self.reservations.items()
                if not active or expires <= now or not _directly_connected(self.host, relay)
                or self.is_banned(relay)]
        for relay in gone:
            self._drop(relay, "inactive" if not active else "expired" if self.reservations[relay] <= now
                       else "disconnected")
        changed = bool(gone)
        if not active:
            return changed
        for relay in [relay for relay, at in self._refresh_at.items() if at <= now]:
            if not await self.reserve(relay):
                self._drop(relay, "refresh refused")
                changed = True
        for relay in self._candidates():
            if len(self.reservations) >= self.wanted:
                break
            if await self.reserve(relay):
                changed = True
            else:
                self._not_before[relay] = time.monotonic() + RETRY_S
        return changed

    def _candidates(self) -> list[ID]:
        now = time.monotonic()
        for peer in [peer for peer, until in self._not_before.items() if until <= now]:
            del self._not_before[peer]
        store = self.host.get_peerstore()
        candidates = []
        for peer in self.host.get_connected_peers():
            if (peer in self.reservations or self.is_banned(peer)
                    or self._not_before.get(peer, 0.0) > now
                    or not _directly_connected(self.host, peer)):
                continue
            try:
                known = store.get_protocols(peer)
            except Exception:
                known = []
            # Peers that told identify they relay come first; others are asked too
            # (their protocol list may not have arrived yet).
            candidates.append((0 if HOP_PROTOCOL_ID in known else 1, str(peer), peer))
        return [peer for _, _, peer in sorted(candidates)]

    async def reserve(self, relay: ID) -> bool:
        """Ask ``relay`` for a reservation (or refresh ours); True when granted."""
        stream = None
        try:
            with trio.fail_after(RESERVE_TIMEOUT_S):
                stream = await self.host.new_stream(relay, [HOP_PROTOCOL_ID])
                granted = await libp2p_compat.make_reservation(self._transport, stream, relay)
                expires = libp2p_compat.reservation_expiry(self._transport, relay)
        except Exception as error:
            logger.debug("reservation on %s failed: %r", relay, error)
            granted, expires = False, 0.0
        finally:
            if stream is not None:
                try:
                    await stream.close()
                except Exception:
                    pass
        if not granted or expires <= time.time():
            return False
        new = relay not in self.reservations
        self.reservations[relay] = expires
        self._refresh_at[relay] = time.time() + (expires - time.time()) / 2
        if new:
            logger.info("relay reservation held relay=%s ttl_s=%d", relay, expires - time.time())
        return True

    def _drop(self, relay: ID, why: str) -> None:
        self.reservations.pop(relay, None)
        self._refresh_at.pop(relay, None)
        logger.info("relay reservation dropped relay=%s why=%s", relay, why)


async def dial_relayed(host: IHost, circuit: multiaddr.Multiaddr) -> None:
    """Open a connection to the circuit's target through its relay (the caller sets a deadline)."""
    relay_addr, relay, target = circuit_parts(circuit)
    if relay == host.get_id() or target == host.get_id():
        raise RelayDialError(f"{circuit} relays through or to ourselves")
    relay_addrs = [] if str(relay_addr).startswith("/p2p/") else [relay_addr]
    try:
        await host.connect(PeerInfo(relay, relay_addrs))
        stream = await host.new_stream(relay, [HOP_PROTOCOL_ID])
    except Exception as error:
        metrics.RELAYED_DIALS.labels(outcome="failed").inc()
        raise RelayDialError(f"relay {relay} unreachable: {error}") from error
    try:
        await write_delimited_msg(stream, HopMessage(
            type=HopMessage.CONNECT, peer=CircuitPeerId(id=target.to_bytes())))
        answer = await read_delimited_msg(stream, HopMessage)
        status = StatusCode(answer.status) if answer.HasField("status") else StatusCode.UNUSED
        if status != StatusCode.OK:
            raise RelayDialError(f"relay {relay} refused the circuit to {target}: {status.name}")
        raw = RawConnection(stream=stream, initiator=True, connection_type=ConnectionType.RELAYED,
                            addresses=[multiaddr.Multiaddr(f"/p2p/{relay}/p2p-circuit/p2p/{target}")])
        connection = await host.upgrade_outbound_connection(raw, target)
        duration_s = answer.limit.duration if answer.HasField("limit") else 0
        if duration_s > 0:
            _circuit_ends[connection] = trio.current_time() + duration_s
    except BaseException as error:
        metrics.RELAYED_DIALS.labels(outcome="failed").inc()
        with trio.CancelScope(shield=True):
            try:
                await stream.reset()
            except Exception:
                pass
        if isinstance(error, Exception) and not isinstance(error, RelayDialError):
            raise RelayDialError(f"circuit to {target} via {relay} failed: {error}") from error
        raise
    metrics.RELAYED_DIALS.labels(outcome="ok").inc()
    logger.info("connected through relay peer=%s relay=%s", target, relay)
