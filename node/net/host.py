"""The libp2p host: one Ed25519 key, Noise only, yamux, TCP.

The node's identity seed (``identity.key``) is the libp2p key, so the libp2p
peer id equals ``protocol.identity.Identity.peer_id`` for the same seed and a
peer's gossip/stream identity is the key that signs its envelopes.

Why the options below are not py-libp2p's defaults (0.8.1):

- ``new_host`` offers plaintext, secio and TLS next to Noise unless ``sec_opt``
  is given; a plaintext connection would let anyone claim any peer id.
- The default muxer table offers mplex as a fallback; we offer yamux only.
- With ``max_connections_per_peer`` above 1 every dial waits ~250 ms for a
  second connection; one connection per peer is all gossip needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import multiaddr
from libp2p import new_host
from libp2p.abc import IHost
from libp2p.crypto.ed25519 import create_new_key_pair as ed25519_key_pair
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as x25519_key_pair
from libp2p.custom_types import TMuxerOptions, TProtocol, TSecurityOptions
from libp2p.network.config import ConnectionConfig
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux

from node.net.libp2p_tuning import apply as apply_libp2p_tuning

logger = logging.getLogger(__name__)

SEED_BYTES = 32


@dataclass(frozen=True)
class HostParts:
    """A built (not yet running) host plus what is needed to run it."""

    host: IHost
    key_pair: KeyPair
    listen_addrs: tuple[multiaddr.Multiaddr, ...]

    @property
    def peer_id(self) -> ID:
        return self.host.get_id()


def key_pair_from_seed(seed: bytes) -> KeyPair:
    """The libp2p key pair for a 32-byte Ed25519 seed (same key as protocol.identity)."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"Ed25519 seed must be {SEED_BYTES} bytes, got {len(seed)}")
    return ed25519_key_pair(seed)


def peer_id_from_seed(seed: bytes) -> ID:
    return ID.from_pubkey(key_pair_from_seed(seed).public_key)


def noise_only(key_pair: KeyPair) -> TSecurityOptions:
    """Security table offering Noise and nothing else (no plaintext fallback)."""
    return {
        NOISE_PROTOCOL_ID: NoiseTransport(key_pair, noise_privkey=x25519_key_pair().private_key)
    }


def yamux_only() -> TMuxerOptions:
    return {TProtocol(YAMUX_PROTOCOL_ID): Yamux}


def connection_config(dial_timeout_s: float = 10.0) -> ConnectionConfig:
    return ConnectionConfig(max_connections_per_peer=1, dial_timeout=dial_timeout_s)


def build_host(seed: bytes, listen: str,
               extra_addrs: Callable[[], list[multiaddr.Multiaddr]] | None = None) -> HostParts:
    """Build a host for ``seed`` that will listen on ``listen`` (``/tcp/0`` allowed).

    ``extra_addrs()`` are advertised after the listen addresses (identify, peer
    records): the ``/p2p-circuit`` addresses of ``node.net.reach.reachability``.
    The host is not listening yet: run it with ``host.run(parts.listen_addrs)``
    *after* the pubsub services have started (see ``node.net.service``).
    """
    apply_libp2p_tuning()
    key_pair = key_pair_from_seed(seed)
    listen_addr = multiaddr.Multiaddr(listen)
    host = new_host(
        key_pair=key_pair,
        sec_opt=noise_only(key_pair),
        muxer_opt=yamux_only(),
        listen_addrs=[listen_addr],
        connection_config=connection_config(),
        enable_mDNS=False,
        enable_upnp=False,
    )
    if extra_addrs is not None:
        _advertise_extra(host, extra_addrs)
    return HostParts(host=host, key_pair=key_pair, listen_addrs=(listen_addr,))


def _advertise_extra(host: IHost, extra_addrs: Callable[[], list[multiaddr.Multiaddr]]) -> None:
    """Append ``extra_addrs()`` (each + ``/p2p/<us>``) to what ``host.get_addrs()`` returns.

    Not through new_host's ``addrs_factory``: ``BasicHost.get_addrs`` strips an
    address at its *first* ``/p2p/`` component, which turns
    ``<relay addr>/p2p/<relay>/p2p-circuit`` into the relay's own address under
    our peer id. Identify, identify push and the signed peer record all read
    ``get_addrs``, so wrapping it on this host object reaches all of them.
    """
    own = host.get_addrs
    suffix = multiaddr.Multiaddr(f"/p2p/{host.get_id()}")

    def get_addrs() -> list[multiaddr.Multiaddr]:
        try:
            direct = own()
        except OSError:
            # A listener closed while it is still listed (py-libp2p 0.8.1 reads getsockname()
            # of every listed socket): advertise the relayed addresses rather than let a
            # peer's identify request end the host.
            direct = []
        return [*direct, *(addr.encapsulate(suffix) for addr in extra_addrs())]

    host.get_addrs = get_addrs  # type: ignore[method-assign]


def listen_addrs(host: IHost) -> list[str]:
    """Actual listen addresses including ``/p2p/<peer id>`` (real port when 0 was asked)."""
    return [str(addr) for addr in host.get_addrs()]


def peer_info_from_addr(addr: str) -> PeerInfo:
    """Parse ``/ip4/…/tcp/…/p2p/<peer id>``; raises ValueError when the peer id is missing."""
    try:
        return info_from_p2p_addr(multiaddr.Multiaddr(addr))
    except Exception as exc:
        raise ValueError(f"not a dialable /p2p multiaddr: {addr!r} ({exc})") from exc


def to_peer_id(peer: str | ID) -> ID:
    return peer if isinstance(peer, ID) else ID.from_base58(peer)


def live_connections(host: IHost, peer: ID) -> list[Any]:
    """``peer``'s connections that are not closing.

    py-libp2p 0.8.1 marks a connection closed, then closes its muxer (a write that can
    wait on a slow peer) and only then takes it off the peer's list: in that window the
    list is not empty, ``host.connect`` returns at once and ``new_stream`` finds "no valid
    connections"."""
    listed = host.get_network().connections.get(peer, []) or []
    return [conn for conn in listed if not getattr(conn, "is_closed", False)]


async def connect(host: IHost, info: PeerInfo) -> None:
    """``host.connect``, except that a connection still listed while it closes is not a
    connection: the peer is dialled again (the swarm's dial skips closed ones)."""
    if live_connections(host, info.peer_id) or not host.get_network().connections.get(info.peer_id):
        await host.connect(info)
        return
    host.get_peerstore().add_addrs(info.peer_id, info.addrs, 120)
    connections = await host.get_network().dial_peer(info.peer_id)
    started = getattr(connections[0], "event_started", None) if connections else None
    if started is not None:
        await started.wait()


async def disconnect(host: IHost, peer: ID, rounds: int = 8) -> None:
    """Close every connection to ``peer``, including one that registers meanwhile.

    ``host.disconnect`` (py-libp2p 0.8.1 ``Swarm.close_peer``) closes the connections it
    listed, awaiting each, and then drops the peer's whole list: a connection registered
    during those awaits (the peer dialling again, or a second dial racing the first) is
    unlisted without being closed — alive at both ends, unseen here, and taken for a live
    connection by the peer. Closing them one by one (each takes itself off the list) and
    looking again leaves none."""
    network = host.get_network()
    for _ in range(rounds):
        listed = list(network.connections.get(peer, []) or [])
        if not listed:
            return
        for connection in listed:
            try:
                await connection.close()
            except Exception as error:
                logger.debug("closing a connection failed peer=%s error=%r", peer, error)
    logger.warning("peer=%s kept connecting while we closed its connections", peer)
