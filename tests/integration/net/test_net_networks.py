"""One network at a time (real py-libp2p hosts in one trio run).

A devnet node and a node of a named testnet that are connected at the transport
level never share a DHT routing table, a gossip mesh, a listing, a purchase
request or a listings-sync page; a node speaking the public IPFS DHT protocol
(``/ipfs/kad/1.0.0``) is never added to our routing table. Each test carries a
positive control (a peer of our own network that does get in), so a refusal
cannot pass by everything being refused.
"""

from __future__ import annotations

import time

import pytest
import trio
from libp2p.kad_dht.common import PROTOCOL_ID as IPFS_KAD
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.peer.id import ID
from libp2p.tools.anyio_service import background_trio_service

from node.config import NetConfig
from node.net.discovery import DiscoveryConfig
from node.net.gossip_config import GossipConfig
from node.net.reqresp import RequestFailed
from node.net.service import NetService
from protocol.envelope import Envelope, seal
from protocol.identity import Identity
from protocol.messages import PurchaseRequest
from protocol.topics import DHT_PROTOCOL, SKILLS, on_network
from tests.support.net import Inbox, make_listing
from tests.support.wait import wait_until_async

TESTNET = "testnet-isolation"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def node(network: str = "devnet", bootstrap: list[str] | None = None,
         discovery: bool = True) -> NetService:
    config = NetConfig(network=network, bootstrap=bootstrap or [], heartbeat_s=0.5,
                       reconnect_max_backoff_s=2.0)
    # Rounds are run by hand below; the background loop only walks every minute.
    rounds = DiscoveryConfig(enabled=discovery, interval_s=60.0, fast_interval_s=60.0)
    return NetService(config, Identity.generate(), gossip_config=GossipConfig(heartbeat_s=0.5),
                      discovery_config=rounds)


def identified(net: NetService, peer: NetService) -> bool:
    """``net``'s peerstore holds what identify told it about ``peer``."""
    try:
        return bool(net.host.get_peerstore().get_protocols(peer.host.get_id()))
    except Exception:
        return False


def in_table(net: NetService, peer_id: ID) -> bool:
    assert net.discovery is not None
    return bool(net.discovery.dht.routing_table.peer_in_table(peer_id))


async def start(nursery: trio.Nursery, *nets: NetService) -> None:
    for net in nets:
        await nursery.start(net.run)


def purchase_request(buyer: NetService) -> bytes:
    request = PurchaseRequest(request_id="ab" * 16, listing_id="cd" * 32,
                              buyer_address="0x" + "33" * 20)
    return seal(buyer.identity, request.KIND, request, buyer.sequence.next(), now_ms())


async def test_nodes_of_two_networks_never_exchange_a_message(nursery: trio.Nursery) -> None:
    hub = node()
    await start(nursery, hub)
    ours = node(bootstrap=[hub.listen_addrs()[0]])
    theirs = node(TESTNET, bootstrap=[hub.listen_addrs()[0]])
    await start(nursery, ours, theirs)
    their_peer = node(TESTNET, bootstrap=[theirs.listen_addrs()[0]])
    await start(nursery, their_peer)
    inboxes = {net.peer_id: Inbox() for net in (hub, ours, theirs, their_peer)}
    for net in (hub, ours, theirs, their_peer):
        inboxes[net.peer_id].attach(net)

    # The testnet node is connected to the hub: only the protocols keep them apart.
    await wait_until_async(lambda: theirs.peer_id in hub.connected_peers(), 30, "transport connection")
    await wait_until_async(lambda: ours.peer_id in hub.mesh_peers(SKILLS), 30, "our mesh")
    await wait_until_async(lambda: identified(hub, theirs) and identified(theirs, hub)
                     and identified(hub, ours), 30, "identify both ways")
    assert on_network(DHT_PROTOCOL, TESTNET) in hub.host.get_peerstore().get_protocols(
        theirs.host.get_id())

    # DHT: a round admits the devnet peer and never the testnet one, on either side.
    for net in (hub, ours, theirs):
        assert net.discovery is not None
        await net.discovery.round()
    assert in_table(hub, ours.host.get_id())
    assert not in_table(hub, theirs.host.get_id())
    assert not in_table(theirs, hub.host.get_id())

    # Gossip: each network's listing reaches its own nodes and never the other's.
    listing = make_listing(hub.identity, "devnet-skill", now_ms())
    await hub.publish(SKILLS, listing)
    their_listing = make_listing(theirs.identity, "testnet-skill", now_ms())
    await wait_until_async(lambda: theirs.peer_id in their_peer.mesh_peers(SKILLS), 30, "their mesh")
    await theirs.publish(SKILLS, their_listing)
    await wait_until_async(lambda: any(e.message() == listing for e in inboxes[ours.peer_id].listings),
                     30, "the devnet listing at the devnet peer")
    await wait_until_async(lambda: any(e.message() == their_listing
                                 for e in inboxes[their_peer.peer_id].listings),
                     30, "the testnet listing at the testnet peer")
    assert theirs.peer_id not in hub.mesh_peers(SKILLS) + hub.topic_peers(SKILLS)
    assert hub.peer_id not in theirs.mesh_peers(SKILLS) + theirs.topic_peers(SKILLS)
    for net in (theirs, their_peer):
        assert all(e.message() != listing for e in inboxes[net.peer_id].listings)
    for net in (hub, ours):
        assert all(e.message() != their_listing for e in inboxes[net.peer_id].listings)

    # Purchases: the request never reaches the other network's handler.
    handled: list[str] = []

    async def handle(peer_id: str, envelope: Envelope) -> bytes:
        handled.append(peer_id)
        return hub.purchases.error_reply("bad_request", "test")

    hub.serve_purchases(handle)
    await ours.request(hub.peer_id, purchase_request(ours), timeout_s=10)
    assert handled == [ours.peer_id]
    with pytest.raises(RequestFailed, match="does not speak"):
        await theirs.request(hub.peer_id, purchase_request(theirs), timeout_s=10)
    assert handled == [ours.peer_id]

    # Listings sync: the testnet node gets no page from the devnet hub.
    served: list[int] = []

    async def source(cursor: int, limit: int, max_bytes: int, scope: object = None) -> tuple[list[bytes], int, bool]:
        served.append(cursor)
        return [], cursor, False

    hub.serve_listings_sync(source)
    report = await theirs.sync.sync_with(hub.peer_id)
    assert report.pages == 0 and report.accepted == 0
    assert report.stopped.startswith("failed") and "does not speak" in report.stopped
    assert served == []


async def test_a_node_speaking_the_ipfs_dht_is_not_added_to_our_routing_table(
        nursery: trio.Nursery) -> None:
    ours = node()
    await start(nursery, ours)
    peer = node(bootstrap=[ours.listen_addrs()[0]])
    ipfs = node(bootstrap=[ours.listen_addrs()[0]], discovery=False)
    # py-libp2p's stock DHT, as any IPFS node runs it, on the third host.
    stock = KadDHT(ipfs.host, DHTMode.SERVER)
    await start(nursery, peer, ipfs)
    async with background_trio_service(stock):
        await wait_until_async(lambda: identified(ours, ipfs) and identified(ours, peer), 30,
                         "identify")
        assert IPFS_KAD in ours.host.get_peerstore().get_protocols(ipfs.host.get_id())
        assert ours.discovery is not None
        await ours.discovery.round()
        assert in_table(ours, peer.host.get_id())
        assert not in_table(ours, ipfs.host.get_id())

        # Nor does the IPFS node get in by querying us: we do not speak its protocol.
        await stock.add_peer(ours.host.get_id(), skip_server_mode_check=True)
        with trio.move_on_after(10):
            await stock.peer_routing.find_closest_peers_network(bytes(32))
        await ours.discovery.round()
        assert not in_table(ours, ipfs.host.get_id())
    handlers = ours.host.get_mux().handlers
    assert IPFS_KAD not in handlers
    assert on_network(DHT_PROTOCOL, "devnet") in handlers


def test_ids_carry_the_network() -> None:
    assert SKILLS == "/crystalmesh/devnet/1/skills"
    assert on_network(SKILLS, "mainnet") == "/crystalmesh/mainnet/1/skills"
    assert on_network(DHT_PROTOCOL, TESTNET) == f"/crystalmesh/{TESTNET}/kad/1.0.0"
