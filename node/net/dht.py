"""py-libp2p's Kademlia DHT (0.8.1) under a crystalmesh protocol id, admitting only our peers.

The library speaks ``/ipfs/kad/1.0.0``, the public IPFS DHT's protocol: a
module constant (``libp2p.kad_dht.common.PROTOCOL_ID``) imported by name into
``kad_dht``, ``peer_routing``, ``value_store`` and ``provider_store``, with no
per-instance setting (the ``protocol_prefix`` argument is only checked, never
used). Patching the constant would put every DHT of the process on one network,
and one process may run nodes of two networks (tests, simulations). So each
DHT is handed a view of the host, ``DhtHost``, that puts our id (for example
``/crystalmesh/devnet/kad/1.0.0``, ``protocol.topics.DHT_PROTOCOL``) wherever
the library names its own: the stream handler it registers and every stream
it opens (FIND_NODE queries, value and provider RPCs). Everything else passes
through to the real host, except that the connected peers a lookup falls
back on are only those known to speak our id. Our node therefore neither
answers nor dials ``/ipfs/kad/1.0.0``, and identify advertises only our id.

Routing-table admission. The library adds a peer when identify lists the kad
protocol *or has not run yet*, and adds peers named in FIND_NODE answers
before anyone has spoken to them. ``admit_only_speakers`` narrows that to
peers known to speak our id: identify listed it, or the peer opened a stream
on it (the library's ``skip_server_mode_check`` path, taken only from our
own stream handler). A node of another network, or an IPFS node, never
enters our table, so our lookups never dial it and our answers never name it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from libp2p.abc import IHost, INetStream
from libp2p.custom_types import StreamHandlerFn, TProtocol
from libp2p.kad_dht.common import PROTOCOL_ID as LIBRARY_PROTOCOL
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.kad_dht.routing_table import RoutingTable
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.records.validator import NamespacedValidator

from protocol.topics import DHT_PROTOCOL

logger = logging.getLogger(__name__)


class DhtHost:
    """The host as one DHT sees it: the library's kad protocol id is ``protocol_id``."""

    def __init__(self, host: IHost, protocol_id: str = DHT_PROTOCOL) -> None:
        self._host = host
        self.protocol_id = TProtocol(protocol_id)

    def _ours(self, protocol: TProtocol) -> TProtocol:
        return self.protocol_id if protocol == LIBRARY_PROTOCOL else protocol

    def set_stream_handler(self, protocol_id: TProtocol, handler: StreamHandlerFn) -> None:
        self._host.set_stream_handler(self._ours(protocol_id), handler)

    def remove_stream_handler(self, protocol_id: TProtocol) -> None:
        self._host.remove_stream_handler(self._ours(protocol_id))

    async def new_stream(self, peer_id: ID, protocol_ids: Sequence[TProtocol]) -> INetStream:
        return await self._host.new_stream(peer_id, [self._ours(p) for p in protocol_ids])

    def get_connected_peers(self) -> list[ID]:
        """Connected peers that speak our id (the library falls back on these for lookups)."""
        return [peer for peer in self._host.get_connected_peers()
                if speaks(self._host, peer, self.protocol_id)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)


def speaks(host: IHost, peer: ID, protocol_id: str) -> bool:
    """True when the peerstore (filled by identify) lists ``protocol_id`` for ``peer``."""
    try:
        return bool(host.get_peerstore().supports_protocols(peer, [protocol_id]))
    except Exception:
        return False


AddPeer = Callable[..., Awaitable[bool]]


def admit_only_speakers(routing_table: RoutingTable, host: IHost, protocol_id: str) -> None:
    """Let ``routing_table`` admit a peer only once it is known to speak ``protocol_id``."""
    add_peer: AddPeer = routing_table.add_peer

    async def admitted(peer: PeerInfo | ID, skip_server_mode_check: bool = False) -> bool:
        peer_id = peer.peer_id if isinstance(peer, PeerInfo) else peer
        # skip_server_mode_check: the peer opened a stream on our id (our own handler).
        if not skip_server_mode_check and not speaks(host, peer_id, protocol_id):
            logger.debug("dht: not admitting peer=%s (does not speak %s)", peer_id, protocol_id)
            return False
        # Checked here; the library's own check would look for /ipfs/kad/1.0.0.
        return await add_peer(peer, skip_server_mode_check=True)

    routing_table.add_peer = admitted  # type: ignore[method-assign,assignment]


def _drop_provider(key: bytes, provider: PeerInfo) -> None:
    """ADD_PROVIDER from a peer: not stored (this DHT only routes peers)."""


def build_dht(host: IHost, protocol_id: str = DHT_PROTOCOL) -> KadDHT:
    """A KadDHT server on ``protocol_id`` that answers FIND_NODE and PING and stores nothing."""
    refuse_all = NamespacedValidator({}, strict_validation=True)
    dht = KadDHT(cast(IHost, DhtHost(host, protocol_id)), DHTMode.SERVER, enable_random_walk=False,
                 validator=refuse_all, validator_changed=True, strict_validation=True)
    dht.provider_store.add_provider = _drop_provider  # type: ignore[method-assign]
    admit_only_speakers(dht.routing_table, host, protocol_id)
    return dht
