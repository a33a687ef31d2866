"""Churn (real py-libp2p hosts in one trio run): a peer restarted with the same identity
on a new port is found again through the DHT by a peer that kept it, and a node that
restarts with an empty bootstrap list reconnects from its saved peers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import multiaddr
import trio

from node.config import NetConfig
from node.net import saved_peers
from node.net.discovery import DiscoveryConfig
from node.net.gossip_config import GossipConfig
from node.net.service import NetService
from protocol.identity import Identity
from tests.support.wait import wait_until_async

FAST = DiscoveryConfig(target_peers=4, max_kept=8, interval_s=2.0, fast_interval_s=0.5,
                       lookup_timeout_s=10.0)
# A node that takes part in the DHT but keeps (dials) none of the peers it finds.
KEEPS_NONE = DiscoveryConfig(target_peers=4, max_kept=0, interval_s=2.0, fast_interval_s=0.5,
                             lookup_timeout_s=10.0)
SERVES_ONLY = DiscoveryConfig(max_kept=0, lookup_timeout_s=0.0)
REFOUND_WITHIN_S = 30.0


def node(identity: Identity, bootstrap: list[str], discovery: DiscoveryConfig = FAST,
         peers_path: Path | None = None) -> NetService:
    config = NetConfig(bootstrap=bootstrap, heartbeat_s=0.5, reconnect_max_backoff_s=30.0)
    return NetService(config, identity, gossip_config=GossipConfig(heartbeat_s=0.5),
                      discovery_config=discovery, peers_path=peers_path, save_peers_s=0.5)


async def run_until_cancelled(scope: trio.CancelScope, net: NetService,
                              task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with scope:
        await net.run(task_status=task_status)


async def start(nursery: trio.Nursery, net: NetService) -> trio.CancelScope:
    scope = trio.CancelScope()
    await nursery.start(run_until_cancelled, scope, net)
    return scope


async def crash(net: NetService, scope: trio.CancelScope) -> None:
    """Stop a node abruptly: its connections and listener close, nothing is saved on the way."""
    await net.host.close()
    scope.cancel()


async def test_a_peer_restarted_on_a_new_port_is_found_again_through_the_dht(
        nursery: trio.Nursery) -> None:
    hub = node(Identity.generate(), [])
    await start(nursery, hub)
    moving_identity = Identity.generate()
    moving = node(moving_identity, [hub.listen_addrs()[0]], KEEPS_NONE)
    moving_scope = await start(nursery, moving)
    keeper = node(Identity.generate(), [hub.listen_addrs()[0]])
    await start(nursery, keeper)
    old_addr = moving.listen_addrs()[0]
    keeper.connect(old_addr)  # the keeper redials it whenever it drops
    await wait_until_async(lambda: moving.peer_id in keeper.connected_peers(), 30, "keeper connected")

    await crash(moving, moving_scope)
    await wait_until_async(lambda: moving.host.get_id() in keeper.peer_manager.unreachable(), 30,
                     "the keeper failing to redial the old address")

    # Same identity, a new port; it knows only the hub, serves the DHT and looks nobody up
    # (a zero lookup timeout), so only the keeper's own search can bring them together.
    restarted = node(moving_identity, [hub.listen_addrs()[0]], SERVES_ONLY)
    await start(nursery, restarted)
    assert restarted.listen_addrs()[0] != old_addr
    started = trio.current_time()
    await wait_until_async(lambda: restarted.peer_id in keeper.connected_peers(), REFOUND_WITHIN_S,
                     "the keeper to find the restarted peer again")
    print(f"re-found after {trio.current_time() - started:.1f} s")
    assert keeper.peer_id not in [p.peer_id for p in restarted.peers() if p.kept]


async def test_a_kept_peer_is_redialled_on_a_fresh_address_despite_the_stale_one(
        nursery: trio.Nursery) -> None:
    """py-libp2p alone dials only the first (stale) address and then refuses for 60 s."""
    identity = Identity.generate()
    peer = node(identity, [], DiscoveryConfig(enabled=False))
    peer_scope = await start(nursery, peer)
    keeper = node(Identity.generate(), [], DiscoveryConfig(enabled=False))
    await start(nursery, keeper)
    keeper.connect(peer.listen_addrs()[0])
    await wait_until_async(lambda: peer.peer_id in keeper.connected_peers(), 30, "connected")
    await crash(peer, peer_scope)
    await wait_until_async(lambda: peer.host.get_id() in keeper.peer_manager.unreachable(), 30,
                     "a failed redial")

    # It comes back on a new port, knowing nobody; its new address reaches the keeper's
    # peerstore the way a DHT answer or a signed peer record puts it there.
    restarted = node(identity, [], DiscoveryConfig(enabled=False))
    await start(nursery, restarted)
    new_addr = multiaddr.Multiaddr(restarted.listen_addrs()[0].split("/p2p/")[0])
    keeper.host.get_peerstore().add_addrs(restarted.host.get_id(), [new_addr], 600)
    keeper.peer_manager.wake()
    await wait_until_async(lambda: restarted.peer_id in keeper.connected_peers(), REFOUND_WITHIN_S,
                     "the keeper to dial the fresh address")


async def test_a_node_restarted_without_bootstrap_dials_its_saved_peers(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    peers_path = tmp_path / "peers.json"
    hub = node(Identity.generate(), [])
    await start(nursery, hub)
    other = node(Identity.generate(), [hub.listen_addrs()[0]], KEEPS_NONE)
    await start(nursery, other)
    identity = Identity.generate()
    first = node(identity, [hub.listen_addrs()[0]], peers_path=peers_path)
    first_scope = await start(nursery, first)
    wanted = {hub.peer_id, other.peer_id}

    def saved() -> set[str]:
        return {p.peer_id for p in saved_peers.read(peers_path, "devnet", first.peer_id)}

    await wait_until_async(lambda: wanted <= saved(), 30, "both peers saved")
    await crash(first, first_scope)

    # Neither peer keeps it (one is its bootstrap node, the other keeps nobody).
    again = node(identity, [], peers_path=peers_path)
    await start(nursery, again)
    await wait_until_async(lambda: wanted <= set(again.connected_peers()), REFOUND_WITHIN_S,
                     "reconnected from saved peers")
