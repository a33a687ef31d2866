"""Circuit relay v2: the relay (hop) this node offers, with every resource bounded.

py-libp2p 0.8.1's ``CircuitV2Protocol`` is used for what it does well: the
reservation bookkeeping and its RESERVE answer (signed voucher, relay
addresses), and the STOP side every node runs to accept relayed connections.
Its hop entry point and its CONNECT relay are replaced here, for reasons
read in its code (``libp2p/relay/circuit_v2/protocol.py``):

- RESERVE honours ``msg.peer``: any peer can reserve in another peer's name.
  Here a reservation is always for the peer at the other end of the stream.
- Reservations count against the total until they expire (an hour), even
  when their peer is gone; there is no limit per IP address, and no rate
  limit on hop requests: a few identities fill the relay for an hour. Here
  reservations of disconnected peers are dropped before counting, each IP
  holds at most ``max_reservations_per_ip``, and each peer gets
  ``hop_per_minute`` hop requests (burst ``hop_burst``); over it, it is
  refused (``RESOURCE_LIMIT_EXCEEDED``) and counted.
- One hop stream may carry any number of messages; here one, read within
  ``HOP_READ_TIMEOUT_S``.
- Circuits are bounded per destination reservation only (``max_circuit_conns``),
  never in total nor per source; the duration cap is checked only when data
  arrives (an idle circuit lives forever); and ``_active_relays`` is keyed
  by peer, so two circuits to one destination tear each other down. Here the
  CONNECT relay is ours: at most ``max_circuits`` in all and
  ``max_circuits_per_peer`` per source and per destination, a hard deadline
  (``circuit_duration_s``) and a shared byte budget (``circuit_bytes``) per
  circuit, both streams reset at the end, and the bytes counted.

Whether the hop protocol is offered at all is ``serving`` (``net.relay_service``:
``on``, ``off``, or ``auto`` = while AutoNAT says the node is public); the
handler is registered only while serving, so identify advertises it only then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from libp2p.abc import IHost, INetStream
from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage, Limit, StopMessage
from libp2p.relay.circuit_v2.pb.circuit_pb2 import PeerId as CircuitPeerId
from libp2p.relay.circuit_v2.protocol import PROTOCOL_ID as HOP_PROTOCOL_ID
from libp2p.relay.circuit_v2.protocol import STOP_PROTOCOL_ID, CircuitV2Protocol
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode, to_proto_status
from libp2p.relay.circuit_v2.resources import RelayLimits as LibraryRelayLimits
from libp2p.relay.circuit_v2.utils import read_delimited_msg, write_delimited_msg

from node import metrics
from node.config import NetConfig
from node.net import libp2p_compat
from node.net.rules import TokenBuckets

logger = logging.getLogger(__name__)

HOP_READ_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
PUMP_READ_BYTES = 65_535

__all__ = ["HOP_PROTOCOL_ID", "STOP_PROTOCOL_ID", "RelayLimits", "RelayProtocol"]


@dataclass(frozen=True)
class RelayLimits:
    """What one public node gives to relaying (defaults: ``NetConfig``, docs/operations.md).

    A reservation lets a private peer be reached through us; it lasts while its
    peer stays connected, up to ``reservation_ttl_s`` (the holder refreshes it).
    A circuit carries one relayed connection: bounded in number, time and bytes
    (go-libp2p's defaults are 2 min / 128 KiB; ours carry a purchase, a few pages of
    listings sync, and the gossip that rides on the same connection meanwhile).
    Hop requests (RESERVE or CONNECT) per peer: a loop is refused, not served.
    """

    max_reservations: int = NetConfig.relay_max_reservations
    max_reservations_per_ip: int = NetConfig.relay_max_reservations_per_ip
    reservation_ttl_s: int = NetConfig.relay_reservation_ttl_s
    max_circuits: int = NetConfig.relay_max_circuits
    max_circuits_per_peer: int = NetConfig.relay_max_circuits_per_peer
    circuit_duration_s: int = NetConfig.relay_circuit_duration_s
    circuit_bytes: int = NetConfig.relay_circuit_bytes
    hop_per_minute: float = NetConfig.relay_hop_per_minute
    hop_burst: int = 10

    @classmethod
    def from_config(cls, config: NetConfig) -> RelayLimits:
        return cls(
            max_reservations=config.relay_max_reservations,
            max_reservations_per_ip=config.relay_max_reservations_per_ip,
            reservation_ttl_s=config.relay_reservation_ttl_s,
            max_circuits=config.relay_max_circuits,
            max_circuits_per_peer=config.relay_max_circuits_per_peer,
            circuit_duration_s=config.relay_circuit_duration_s,
            circuit_bytes=config.relay_circuit_bytes,
            hop_per_minute=config.relay_hop_per_minute,
        )


class RelayProtocol(CircuitV2Protocol):
    """STOP side always (accept relayed connections); hop side while ``serving``."""

    def __init__(self, host: IHost, limits: RelayLimits | None = None,
                 is_banned: Callable[[ID], bool] = lambda peer: False) -> None:
        self.relay_limits = limits or RelayLimits()
        bound = self.relay_limits
        super().__init__(
            host,
            LibraryRelayLimits(
                duration=bound.circuit_duration_s,
                data=bound.circuit_bytes,
                max_circuit_conns=bound.max_circuits_per_peer,
                max_reservations=bound.max_reservations,
                reservation_ttl=bound.reservation_ttl_s,
            ),
            allow_hop=False,  # the library registers STOP only; hop is ``serve``'s
        )
        self.is_banned = is_banned
        self.serving = False
        self._buckets = TokenBuckets(bound.hop_per_minute, bound.hop_burst)
        self._reservation_ip: dict[ID, str] = {}
        self._circuits_from: dict[ID, int] = {}
        self._circuits_to: dict[ID, int] = {}
        self.circuits = 0
        self.relayed_bytes = 0
        self.refused: dict[str, int] = {}

    # ------------------------------------------------------------------ control
    def serve(self, on: bool) -> None:
        """Offer (or stop offering) the hop protocol."""
        if on == self.serving:
            return
        self.serving = on
        if on:
            self.host.set_stream_handler(HOP_PROTOCOL_ID, self._on_hop)
        else:
            self.host.remove_stream_handler(HOP_PROTOCOL_ID)
        logger.info("relay service %s", "on" if on else "off")

    def reservations(self) -> int:
        self._drop_gone()
        return len(libp2p_compat.relay_reservations(self.resource_manager))

    def status(self) -> dict[str, Any]:
        return {
            "serving": self.serving,
            "reservations": self.reservations() if self.serving else 0,
            "circuits": self.circuits,
            "relayed_bytes": self.relayed_bytes,
            "refused": dict(self.refused),
        }

    # ------------------------------------------------------------------ hop
    def _refuse(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        metrics.RELAY_REFUSED.labels(reason=reason).inc()

    async def _answer(self, stream: INetStream, code: StatusCode) -> None:
        try:
            with trio.fail_after(HOP_READ_TIMEOUT_S):
                await write_delimited_msg(
                    stream, HopMessage(type=HopMessage.STATUS, status=to_proto_status(code)))
                await stream.close()
        except Exception:
            await _reset(stream)

    async def _on_hop(self, stream: INetStream) -> None:
        peer = stream.muxed_conn.peer_id
        try:
            if not self.serving or self.is_banned(peer) or _is_relayed(stream):
                self._refuse("not_serving" if not self.serving else "denied")
                await self._answer(stream, StatusCode.PERMISSION_DENIED)
                return
            if not self._buckets.allows(peer):
                self._refuse("rate_limited")
                logger.debug("hop request over the rate limit peer=%s", peer)
                await self._answer(stream, StatusCode.RESOURCE_LIMIT_EXCEEDED)
                return
            self._buckets.spend(peer)
            with trio.fail_after(HOP_READ_TIMEOUT_S):
                message = await read_delimited_msg(stream, HopMessage)
            if message.type == HopMessage.RESERVE:
                await self._reserve(stream, peer, message)
            elif message.type == HopMessage.CONNECT:
                await self._connect(stream, peer, message)
            else:
                self._refuse("malformed")
                await self._answer(stream, StatusCode.UNEXPECTED_MESSAGE)
        except Exception as error:  # a hop stream never takes the node down
            logger.debug("hop stream from %s ended: %r", peer, error)
            await _reset(stream)

    def _drop_gone(self) -> None:
        """Reservations of peers no longer connected free their slot (spec: held while connected)."""
        connections = self.host.get_network().connections
        reservations = libp2p_compat.relay_reservations(self.resource_manager)
        for peer in [peer for peer in reservations if not connections.get(peer)]:
            del reservations[peer]
        for peer in [peer for peer in self._reservation_ip if peer not in reservations]:
            del self._reservation_ip[peer]

    async def _reserve(self, stream: INetStream, peer: ID, message: HopMessage) -> None:
        self._drop_gone()
        message.ClearField("peer")  # a reservation is for the peer that asks, never another
        if peer not in libp2p_compat.relay_reservations(self.resource_manager):
            ip = _remote_ip(stream)
            same_ip = sum(1 for held in self._reservation_ip.values() if held == ip)
            if same_ip >= self.relay_limits.max_reservations_per_ip:
                self._refuse("reservations_per_ip")
                await self._answer(stream, StatusCode.RESERVATION_REFUSED)
                return
            reservations = libp2p_compat.relay_reservations(self.resource_manager)
            if len(reservations) >= self.relay_limits.max_reservations:
                self._refuse("reservations")
                await self._answer(stream, StatusCode.RESERVATION_REFUSED)
                return
            self._reservation_ip[peer] = ip
        await libp2p_compat.handle_reserve(self, stream, message)
        await stream.close()

    async def _connect(self, stream: INetStream, source: ID, message: HopMessage) -> None:
        try:
            target = ID(message.peer.id)
        except Exception:
            self._refuse("malformed")
            await self._answer(stream, StatusCode.MALFORMED_MESSAGE)
            return
        limits = self.relay_limits
        reservation = self.resource_manager.get_reservation(target)
        if reservation is None:
            self._refuse("no_reservation")
            await self._answer(stream, StatusCode.NO_RESERVATION)
            return
        if (self.circuits >= limits.max_circuits
                or self._circuits_from.get(source, 0) >= limits.max_circuits_per_peer
                or self._circuits_to.get(target, 0) >= limits.max_circuits_per_peer):
            self._refuse("circuits")
            await self._answer(stream, StatusCode.RESOURCE_LIMIT_EXCEEDED)
            return
        self.circuits += 1
        self._circuits_from[source] = self._circuits_from.get(source, 0) + 1
        self._circuits_to[target] = self._circuits_to.get(target, 0) + 1
        target_stream: INetStream | None = None
        try:
            try:
                with trio.fail_after(STOP_TIMEOUT_S):
                    target_stream = await self.host.new_stream(target, [STOP_PROTOCOL_ID])
                    limit = Limit(duration=limits.circuit_duration_s, data=limits.circuit_bytes)
                    await write_delimited_msg(target_stream, StopMessage(
                        type=StopMessage.CONNECT, peer=CircuitPeerId(id=source.to_bytes()),
                        limit=limit))
                    answer = await read_delimited_msg(target_stream, StopMessage)
            except Exception as error:
                logger.debug("relay to %s failed: %r", target, error)
                self._refuse("target_unreachable")
                await self._answer(stream, StatusCode.CONNECTION_FAILED)
                return
            if answer.HasField("status") and answer.status != StatusCode.OK:
                self._refuse("target_refused")
                await self._answer(stream, StatusCode.CONNECTION_FAILED)
                return
            with trio.fail_after(HOP_READ_TIMEOUT_S):
                await write_delimited_msg(stream, HopMessage(
                    type=HopMessage.STATUS, status=to_proto_status(StatusCode.OK), limit=limit))
            await self._pump(stream, target_stream)
        finally:
            with trio.CancelScope(shield=True):
                await _reset(stream)
                if target_stream is not None:
                    await _reset(target_stream)
            self.circuits -= 1
            _decrement(self._circuits_from, source)
            _decrement(self._circuits_to, target)

    async def _pump(self, a: INetStream, b: INetStream) -> None:
        """Copy both ways until either side ends, the deadline, or the byte budget."""
        budget = [self.relay_limits.circuit_bytes]

        async def copy(source: INetStream, sink: INetStream, done: trio.CancelScope) -> None:
            try:
                while True:
                    data = await source.read(PUMP_READ_BYTES)
                    if not data:
                        break
                    budget[0] -= len(data)
                    if budget[0] < 0:
                        self._refuse("circuit_bytes")
                        break
                    self.relayed_bytes += len(data)
                    metrics.RELAY_BYTES.inc(len(data))
                    await sink.write(data)
            except Exception as error:
                logger.debug("relay copy ended: %r", error)
            done.cancel()

        with trio.move_on_after(self.relay_limits.circuit_duration_s) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(copy, a, b, nursery.cancel_scope)
                nursery.start_soon(copy, b, a, nursery.cancel_scope)
        if deadline.cancelled_caught:
            self._refuse("circuit_duration")


def _decrement(counts: dict[ID, int], peer: ID) -> None:
    left = counts.get(peer, 1) - 1
    if left > 0:
        counts[peer] = left
    else:
        counts.pop(peer, None)


def _is_relayed(stream: INetStream) -> bool:
    """Spec: no reservation or circuit over an already relayed connection."""
    try:
        addrs = stream.muxed_conn.get_transport_addresses()  # type: ignore[attr-defined]
    except Exception:
        return False
    return any("/p2p-circuit" in str(addr) for addr in addrs or ())


def _remote_ip(stream: INetStream) -> str:
    try:
        remote = stream.get_remote_address()
    except Exception:
        remote = None
    return remote[0] if remote else "?"


async def _reset(stream: INetStream) -> None:
    try:
        await stream.reset()
    except Exception:
        logger.debug("stream reset failed", exc_info=True)
