"""Every private member of py-libp2p the node relies on, listed once, with the version checked.

Rule: no module of the node touches a py-libp2p ``_private`` member except this one and
``node.net.libp2p_tuning`` (whose numbered patches replace library internals, each
documented there). Everyone else calls the functions below, each a one-line use of the
member ``PRIVATE_MEMBERS`` names, with why the public API does not serve. Enforced by
``scripts/check_layers.py`` (a ``reach-in``); ``tests/unit/net/test_libp2p_compat.py``
fails when the installed py-libp2p is not ``CHECKED_VERSION`` or lacks one of the
members below, so an upgrade shows at once which of our uses broke.

When a library upgrade adds a public way to do one of these, use it and drop the entry.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

CHECKED_VERSION = "0.8.1"


@dataclass(frozen=True)
class PrivateMember:
    """``owner`` (``module:Class``, or a module for a module-level name) has ``name``;
    ``used_by`` relies on it because ``why``."""

    owner: str
    name: str
    used_by: str
    why: str


PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    PrivateMember("libp2p.kad_dht.peer_routing:PeerRouting", "_query_peer_for_closest",
                  "node.net.discovery", "one FIND_NODE to one chosen peer; the public "
                  "find_peer walks the whole DHT"),
    PrivateMember("libp2p.kad_dht.provider_store:ProviderStore",
                  "_get_providers_from_peer_with_closers", "node.net.dht",
                  "GET_PROVIDERS to one peer, for our bounded walk (find_providers has no limits)"),
    PrivateMember("libp2p.relay.circuit_v2.resources:RelayResourceManager", "_reservations",
                  "node.net.reach.relay", "count and free reservations of peers gone: the "
                  "manager has no count and keeps a slot until it expires"),
    PrivateMember("libp2p.relay.circuit_v2.protocol:CircuitV2Protocol", "_handle_reserve",
                  "node.net.reach.relay", "the library's RESERVE answer, after our per-IP and "
                  "total limits (the protocol has no hook before it)"),
    PrivateMember("libp2p.relay.circuit_v2.transport:CircuitV2Transport", "_make_reservation",
                  "node.net.reach.relay_client", "reserve on one relay we chose, on a stream we "
                  "opened (the transport only reserves while dialling)"),
    PrivateMember("libp2p.relay.circuit_v2.transport:CircuitV2Transport", "_reservations",
                  "node.net.reach.relay_client", "the expiry of the reservation just granted"),
    PrivateMember("libp2p.host.autonat.autonat:AutoNATService", "_observed_ip",
                  "node.net.reach.autonat", "the dial-back only to the address the request came "
                  "from (AutoNAT spec), as the library's own handler does"),
    PrivateMember("libp2p.host.autonat.autonat:AutoNATService", "_handle_dial",
                  "node.net.reach.autonat", "the library's dial-back, after our rate limit and "
                  "address filter"),
    PrivateMember("libp2p.request_response.api:RequestResponse", "_write_message",
                  "node.net.reqresp", "mark when a request is out (node.net.progress): "
                  "send_request has no hook between writing the request and reading the answer"),
    # What node.net.libp2p_tuning replaces (its numbered patches): gone means a patch is lost.
    PrivateMember("libp2p.network.swarm:Swarm", "_trim_connections",
                  "node.net.libp2p_tuning", "patch 14, no trim under a request"),
    PrivateMember("libp2p.network.swarm:Swarm", "_close_connection_async",
                  "node.net.libp2p_tuning", "patch 14 closes a trimmed connection as the library does"),
    PrivateMember("libp2p.network.connection.swarm_connection:SwarmConn", "_created_at",
                  "node.net.libp2p_tuning", "patch 14, a connection's age (the grace period)"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_teardown_if_connected",
                  "node.net.libp2p_tuning", "patch 3, the blacklist teardown race"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_is_subscribed_to_msg",
                  "node.net.libp2p_tuning", "patch 7, duplicates stop at the read loop"),
    PrivateMember("libp2p.pubsub.gossipsub:GossipSub", "_get_peers_to_send",
                  "node.net.libp2p_tuning", "patch 12, flood publishing"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:YamuxStream",
                  "_auto_tune_and_send_window_update", "node.net.libp2p_tuning",
                  "patch 1, yamux window updates"),
    PrivateMember("libp2p.io.trio:TrioTCPStream", "read_lock", "node.net.libp2p_tuning",
                  "patch 19 refills its buffer through the library's read, under this lock"),
    PrivateMember("libp2p.io.trio:TrioTCPStream", "write_lock", "node.net.libp2p_tuning",
                  "patch 20 takes it without a pass when free"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_write_frame",
                  "node.net.libp2p_tuning", "patch 20, frame writes without a pass per lock"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_write_lock",
                  "node.net.libp2p_tuning", "patch 20 serialises frame writes on it"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "streams_lock",
                  "node.net.libp2p_tuning", "patch 21 replaces it by a prompt lock"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:YamuxStream", "window_lock",
                  "node.net.libp2p_tuning", "patch 20 writes at once only when it is free"),
    PrivateMember("libp2p.stream_muxer.rw_lock:ReadWriteLock", "_writer_lock",
                  "node.net.libp2p_tuning", "patch 20 writes at once only when no writer holds "
                  "or waits for the stream"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_cleanup_on_error",
                  "node.net.libp2p_tuning", "patch 22 ends a connection as the library's loop does"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_finalize_stream_locked",
                  "node.net.libp2p_tuning", "patches 22 and 24 drop a closed stream as the "
                  "library does"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_ping_sent_time",
                  "node.net.libp2p_tuning", "patch 22 measures the RTT from a ping's answer"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_rtt",
                  "node.net.libp2p_tuning", "patch 22 keeps the smoothed RTT"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux:Yamux", "_ping_event",
                  "node.net.libp2p_tuning", "patch 22 wakes the RTT loop on a ping's answer"),
    PrivateMember("libp2p.stream_muxer.yamux.yamux", "_yamux_data_read_timeout",
                  "node.net.libp2p_tuning", "patch 22 waits for a DATA body as long as the "
                  "library (PY_YAMUX_DATA_READ_TIMEOUT)"),
    PrivateMember("libp2p.network.stream.net_stream:NetStream", "_state_lock",
                  "node.net.libp2p_tuning", "patch 25 makes our outbound pubsub stream's prompt"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_handle_dead_peer",
                  "node.net.libp2p_tuning", "patches 4, 11 and 27 tear a peer's stream down as "
                  "the library does"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_peer_is_connected",
                  "node.net.libp2p_tuning", "patch 27 keeps a peer's subscriptions only while "
                  "the library would open a new stream to it"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_peer_subscription_count",
                  "node.net.libp2p_tuning", "patch 27 restores it with the subscriptions"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_replay_recent_messages",
                  "node.net.libp2p_tuning", "patch 27 relies on it to resend what a dead stream "
                  "could not"),
    PrivateMember("libp2p.pubsub.pubsub:Pubsub", "_replayed_recent_topics",
                  "node.net.libp2p_tuning", "patch 27 spends its gate: one replay per interval "
                  "to a peer that kills our stream again and again"),
)


# ---------------------------------------------------------------------- the uses
async def query_peer_for_closest(peer_routing: Any, server: Any, key: bytes) -> Any:
    """FIND_NODE ``key`` to ``server`` only (its answer lands in the peerstore)."""
    return await peer_routing._query_peer_for_closest(server, key)


async def providers_from_peer(provider_store: Any, peer: Any, key: bytes) -> tuple[Any, Any]:
    """GET_PROVIDERS ``key`` to ``peer``: (providers, closer peers)."""
    return await provider_store._get_providers_from_peer_with_closers(peer, key)  # type: ignore[no-any-return]


def relay_reservations(resource_manager: Any) -> dict[Any, Any]:
    """The relay's reservations by peer id, live (deleting an entry frees its slot)."""
    reservations: dict[Any, Any] = resource_manager._reservations
    return reservations


async def handle_reserve(protocol: Any, stream: Any, message: Any) -> None:
    """The library's answer to a RESERVE hop message."""
    await protocol._handle_reserve(stream, message)


async def make_reservation(transport: Any, stream: Any, relay: Any) -> bool:
    """Reserve a slot on ``relay`` over ``stream``; True when granted."""
    return bool(await transport._make_reservation(stream, relay))


def reservation_expiry(transport: Any, relay: Any) -> float:
    """When our reservation on ``relay`` expires (0.0 when we hold none)."""
    return float(transport._reservations.get(relay, 0))


def observed_ip(service: Any, stream: Any) -> str | None:
    """The IP address an AutoNAT request came from."""
    observed: str | None = service._observed_ip(stream)
    return observed


async def handle_dial(service: Any, request: Any, observed: str | None, serve: bool) -> Any:
    """The library's AutoNAT dial-back for ``request``."""
    return await service._handle_dial(request, observed, serve)


def request_response_noting_writes(host: Any, on_written: Callable[[], None]) -> Any:
    """py-libp2p's ``RequestResponse`` calling ``on_written()`` each time it has written a
    message (a client's request: the time after it is the peer's)."""
    from libp2p.request_response import RequestResponse

    class NotingWrites(RequestResponse):
        async def _write_message(self, stream: Any, payload: bytes, max_msg_size: int) -> None:
            await super()._write_message(stream, payload, max_msg_size)
            on_written()

    return NotingWrites(host)


# ---------------------------------------------------------------------- the check
def missing_members(members: tuple[PrivateMember, ...] = PRIVATE_MEMBERS) -> list[PrivateMember]:
    """The members the installed py-libp2p lacks: neither on the class (or a base) nor
    assigned as ``self.<name>`` in a method of the class or a base."""
    return [member for member in members if not _has(member)]


def _has(member: PrivateMember) -> bool:
    module_name, _, class_name = member.owner.partition(":")
    try:
        module = importlib.import_module(module_name)
        if not class_name:
            return hasattr(module, member.name)
        owner = getattr(module, class_name)
    except (ImportError, AttributeError):
        return False
    if hasattr(owner, member.name):
        return True
    return any(member.name in _instance_attributes(base) for base in inspect.getmro(owner)
               if base.__module__.startswith("libp2p"))


def _instance_attributes(owner: type) -> Iterator[str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
    except (OSError, TypeError, SyntaxError):
        return
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            yield node.attr
