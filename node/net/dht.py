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

Provider records (``ProviderRecords``). Sellers announce "I sell category or tag T"
as a provider record under ``protocol.topics.provider_key(T)``, so a buyer that does
not follow T's listing shard finds them (docs/protocol.md, "Listings that do not
flood"). What a peer can make us hold is bounded: the library already accepts an
ADD_PROVIDER only for the sender itself, with an address, at most 10 per 10 s per
peer and 20 providers per key; ``guard_provider_store`` adds a cap on keys in all
(``max_keys``) and on keys per provider (``max_keys_per_provider``), oldest
dropped first. What a peer can make us *believe* is bounded too: our lookup
(``find``) never copies the providers an answer names into our own store (the
library's ``find_providers`` does, and then answers from that store first, so one
hostile answer would poison every later lookup), takes at most ``per_answer``
providers from any one answer, and is a hint only: what a provider is worth is
decided by the listings sync that follows, where every entry is a signed listing
validated as if gossiped.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import trio
from libp2p.abc import IHost, INetStream
from libp2p.custom_types import StreamHandlerFn, TProtocol
from libp2p.kad_dht.common import PROTOCOL_ID as LIBRARY_PROTOCOL
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.kad_dht.routing_table import RoutingTable
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.records.validator import NamespacedValidator

from node.net import libp2p_compat
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


@dataclass(frozen=True)
class ProviderLimits:
    max_keys: int = 4096
    max_keys_per_provider: int = 64
    per_answer: int = 20
    ask_at_once: int = 4
    max_asked: int = 16
    lookup_timeout_s: float = 5.0
    provide_timeout_s: float = 30.0


def guard_provider_store(dht: KadDHT, limits: ProviderLimits) -> None:
    """Bound the provider records peers can make ``dht`` hold (see the module docstring)."""
    store = dht.provider_store
    add_provider = store.add_provider
    # key -> last added (monotonic), oldest first: the eviction order.
    ages: OrderedDict[bytes, float] = OrderedDict()

    def guarded(key: bytes, provider: PeerInfo) -> None:
        if not isinstance(key, bytes) or not 1 <= len(key) <= 64 or provider is None:
            return
        peer = str(provider.peer_id)
        held = sum(1 for records in store.providers.values() if peer in records)
        if held >= limits.max_keys_per_provider and peer not in store.providers.get(key, {}):
            logger.debug("dht: provider=%s holds %d keys, not adding more", peer, held)
            return
        while key not in store.providers and len(store.providers) >= limits.max_keys and ages:
            oldest, _ = ages.popitem(last=False)
            store.providers.pop(oldest, None)
        add_provider(key, provider)
        ages[key] = time.monotonic()
        ages.move_to_end(key)

    store.add_provider = guarded  # type: ignore[method-assign]


class ProviderRecords:
    """Announce and find provider records on one DHT, bounded (see the module docstring)."""

    def __init__(self, dht: KadDHT, limits: ProviderLimits | None = None) -> None:
        self.dht = dht
        self.limits = limits or ProviderLimits()
        guard_provider_store(dht, self.limits)
        self.provided: set[bytes] = set()

    async def provide(self, key: bytes) -> bool:
        """Keep a record that we provide ``key`` on the closest peers (the library republishes)."""
        self.provided.add(key)
        with trio.move_on_after(self.limits.provide_timeout_s):
            return bool(await self.dht.provider_store.provide(key))
        return False

    async def find(self, key: bytes, count: int = 8) -> list[PeerInfo]:
        """Up to ``count`` providers of ``key`` other than us, within ``lookup_timeout_s``."""
        limits = self.limits
        me = self.dht.host.get_id()
        found: dict[ID, PeerInfo] = {}

        def take(providers: Sequence[PeerInfo]) -> None:
            for provider in list(providers)[: limits.per_answer]:
                if isinstance(provider, PeerInfo) and provider.peer_id != me:
                    found.setdefault(provider.peer_id, provider)

        take(self.dht.provider_store.get_providers(key))
        with trio.move_on_after(limits.lookup_timeout_s):
            if len(found) < count:
                closest = list(await self.dht.peer_routing.find_closest_peers_network(key))
                asked = [peer for peer in closest if peer != me][: limits.max_asked]
                for start in range(0, len(asked), limits.ask_at_once):
                    async with trio.open_nursery() as nursery:
                        for peer in asked[start:start + limits.ask_at_once]:
                            nursery.start_soon(self._ask, peer, key, take)
                    if len(found) >= count:
                        break
        return list(found.values())[:count]

    async def _ask(self, peer: ID, key: bytes, take: Callable[[Sequence[PeerInfo]], None]) -> None:
        try:
            providers, _ = await libp2p_compat.providers_from_peer(self.dht.provider_store,
                                                                    peer, key)
        except Exception as error:  # a peer that answers garbage is only one answer lost
            logger.debug("GET_PROVIDERS to %s failed: %r", peer, error)
            return
        take(providers or [])


def build_dht(host: IHost, protocol_id: str = DHT_PROTOCOL) -> KadDHT:
    """A KadDHT server on ``protocol_id``: FIND_NODE, PING and bounded provider records only."""
    refuse_all = NamespacedValidator({}, strict_validation=True)
    dht = KadDHT(cast(IHost, DhtHost(host, protocol_id)), DHTMode.SERVER, enable_random_walk=False,
                 validator=refuse_all, validator_changed=True, strict_validation=True)
    admit_only_speakers(dht.routing_table, host, protocol_id)
    return dht


def dht_size_estimate(own_key: bytes, peer_keys: Iterable[bytes], k: int = 20) -> int:
    """Network size from the ``k`` peers closest to us: ``mean_j(j × 2^256 / d_j)``.

    Counts ourselves; 1 with no peers. Peers spread uniformly over the key space, so
    the j-th closest sits at ``≈ j × 2^256 / N``; averaging over ``j`` damps the
    luck of the first one. With fewer than ``k`` peers known the routing table holds the
    whole network (every bucket has room for ``k``), so the count is exact: a small devnet
    gets its real size, not the noise of a formula meant for thousands."""
    own = int.from_bytes(own_key, "big")
    distances = sorted(own ^ int.from_bytes(key, "big") for key in peer_keys)
    distances = [distance for distance in distances if distance > 0][:k]
    if len(distances) < k:
        return len(distances) + 1
    estimates = [(j + 1) * 2**256 / distance for j, distance in enumerate(distances)]
    return max(len(distances) + 1, round(sum(estimates) / len(estimates)))
