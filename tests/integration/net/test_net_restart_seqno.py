"""A restarted node's gossip is accepted at once: its pubsub sequence numbers never repeat.

py-libp2p 0.8.1 seeded the seqno counter with the time in seconds; a node that had
published more messages than the seconds it was down repeated ``(from, seqno)`` pairs
with new data, which GossipSub drops as equivocation and penalises (libp2p_tuning, 13.).
GossipSub delivers such a message to the node itself but neither forwards it nor gossips it.
Seen failing with that item removed: the node two hops away never received the restarted
node's listing.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from node.net.service import NetService
from protocol.identity import Identity
from protocol.topics import SKILLS
from tests.support.net import Inbox, make_listing, make_net
from tests.support.wait import wait_until_async

PUBLISHED_BEFORE = 30  # more messages than the seconds the restart takes


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def run_until_cancelled(scope: trio.CancelScope, net: NetService,
                              task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with scope:
        await net.run(task_status=task_status)


async def test_a_restarted_node_publishes_without_repeating_a_seqno(nursery: trio.Nursery) -> None:
    """publisher -> hub -> far, no discovery: far hears the publisher only through the hub."""
    hub = make_net(origin_listings_per_min=6000.0, origin_listings_burst=200, discovery=False)
    await nursery.start(hub.run)
    far = make_net(bootstrap=[hub.listen_addrs()[0]], origin_listings_per_min=6000.0,
                   origin_listings_burst=200, discovery=False)
    await nursery.start(far.run)
    inbox = Inbox()
    inbox.attach(far)
    identity = Identity.generate()
    first = make_net(identity=identity, bootstrap=[hub.listen_addrs()[0]], discovery=False)
    scope = trio.CancelScope()
    await nursery.start(run_until_cancelled, scope, first)
    await wait_until_async(lambda: hub.peer_id in first.mesh_peers(SKILLS)
                           and hub.peer_id in far.mesh_peers(SKILLS), 60, "first and far in the mesh")
    for _ in range(PUBLISHED_BEFORE):
        await first.publish(SKILLS, make_listing(identity, now_ms=now_ms()))
    await wait_until_async(lambda: len(inbox.listings) == PUBLISHED_BEFORE, 60, "first's listings")
    await first.host.close()
    scope.cancel()

    again = make_net(identity=identity, bootstrap=[hub.listen_addrs()[0]], discovery=False)
    await nursery.start(again.run)
    await wait_until_async(lambda: hub.peer_id in again.mesh_peers(SKILLS), 60, "again in the mesh")
    sent = await again.publish(SKILLS, make_listing(identity, now_ms=now_ms()))
    await wait_until_async(lambda: any(envelope.seq == sent.seq for envelope in inbox.listings), 60,
                           "the restarted node's listing two hops away")
    assert far.peer_id not in again.connected_peers()
