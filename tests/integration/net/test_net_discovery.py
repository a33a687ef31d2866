"""Discovery beyond the bootstrap list (real py-libp2p hosts in one trio run): nodes that
know only one bootstrap node find each other through the Kademlia DHT, stay connected
when the bootstrap node dies, and gossip still reaches all of them; the DHT stores
nothing for other peers."""

from __future__ import annotations

import time
from typing import Any

import trio
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.tools.anyio_service import background_trio_service

from node.config import NetConfig
from node.net.dht import DhtHost, ProviderLimits
from node.net.discovery import DiscoveryConfig
from node.net.gossip_config import GossipConfig
from node.net.service import NetService
from protocol.identity import Identity
from protocol.topics import SKILLS
from tests.support.net import Inbox, make_listing
from tests.support.wait import wait_until_async

FAST = DiscoveryConfig(target_peers=4, max_kept=8, interval_s=2.0, fast_interval_s=0.5,
                       lookup_timeout_s=10.0)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def node(bootstrap: list[str], discovery: DiscoveryConfig = FAST) -> NetService:
    config = NetConfig(listen="/ip4/127.0.0.1/tcp/0", bootstrap=bootstrap, heartbeat_s=0.5,
                       reconnect_max_backoff_s=2.0)
    return NetService(config, Identity.generate(), gossip_config=GossipConfig(heartbeat_s=0.5),
                      discovery_config=discovery)


async def run_until_cancelled(scope: trio.CancelScope, net: NetService,
                              task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with scope:
        await net.run(task_status=task_status)


async def test_nodes_that_know_one_bootstrap_find_each_other_and_survive_its_death(
        nursery: trio.Nursery) -> None:
    hub = node([])
    hub_scope = trio.CancelScope()
    await nursery.start(run_until_cancelled, hub_scope, hub)
    others = [node([hub.listen_addrs()[0]]) for _ in range(5)]
    inboxes = [Inbox() for _ in others]
    for net, inbox in zip(others, inboxes, strict=True):
        inbox.attach(net)
        await nursery.start(net.run)
    ids = {net.peer_id for net in others}

    def peers_beyond_hub(net: NetService) -> int:
        return len(ids & set(net.connected_peers()) - {net.peer_id})

    # Nobody was told about anyone but the hub.
    await wait_until_async(lambda: all(peers_beyond_hub(net) >= 3 for net in others), 60,
                           "every node connected to at least 3 non-bootstrap peers")
    assert any(net.discovery is not None and net.discovery.discovered for net in others)
    # The network size the trust cadence scales with (node.trust.cadence): read from the real
    # DHT routing table, never below the peers we are connected to plus ourselves.
    await wait_until_async(lambda: all(net.discovery is not None
                                       and net.discovery.dht.routing_table.size() >= 1
                                       for net in others), 30, "routing tables")
    for net in others:
        assert net.discovery is not None and net.discovery.dht.routing_table.size() >= 1
        assert net.network_size_estimate() >= max(len(net.connected_peers()) + 1,
                                                   net.discovery.dht.routing_table.size() + 1)

    hub_scope.cancel()
    await wait_until_async(lambda: all(hub.peer_id not in net.connected_peers() for net in others), 60,
                           "the hub's connections gone")
    await wait_until_async(lambda: all(len(net.mesh_peers(SKILLS)) >= 2 for net in others), 60,
                           "meshes repaired without the hub")

    seller = others[0]
    listing = make_listing(seller.identity, now_ms=now_ms())
    await seller.publish(SKILLS, listing)
    await wait_until_async(lambda: all(any(e.message() == listing for e in inbox.listings)
                                       for inbox in inboxes[1:]), 60, "gossip reaching every node")
    assert all(peers_beyond_hub(net) >= 2 for net in others)


async def test_dht_stores_no_values_and_few_provider_records_for_a_peer(
    nursery: trio.Nursery,
) -> None:
    """A peer cannot park values in our memory through the DHT, and only a bounded
    number of provider records of its own (node.net.dht.ProviderLimits)."""
    server = node([])
    await nursery.start(server.run)
    client = node([server.listen_addrs()[0]], DiscoveryConfig(enabled=False))
    await nursery.start(client.run)
    await wait_until_async(lambda: server.peer_id in client.connected_peers(), 60, "connected")
    assert server.discovery is not None
    dht = server.discovery.dht
    target = server.host.get_id()

    # The attacker runs py-libp2p's stock DHT (stores anything) on its host, under our id.
    attacker = KadDHT(DhtHost(client.host), DHTMode.SERVER)  # type: ignore[arg-type]
    async with background_trio_service(attacker):
        await attacker.add_peer(target, skip_server_mode_check=True)
        for index in range(10):
            for key in (f"/spam/{index}".encode(), f"plain-{index}".encode(),
                        b"/pk/" + bytes([index]) * 34):
                with trio.move_on_after(5):
                    await attacker.value_store._store_at_peer(target, key, b"x" * 10_000)
        for index in range(100):
            with trio.move_on_after(5):
                await attacker.provider_store._send_add_provider(target, bytes([index]) * 32)
        # The DHT still answers lookups for peers.
        with trio.move_on_after(10):
            found = await attacker.peer_routing.find_closest_peers_network(bytes(32))
    assert dht.value_store.size() == 0
    assert dht.provider_store.size() <= ProviderLimits().max_keys_per_provider
    assert client.host.get_id() in found or found == [] or target in found
    assert server.peer_id in client.connected_peers()
