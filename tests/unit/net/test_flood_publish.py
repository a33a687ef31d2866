"""Flood publishing (node.net.libp2p_tuning, 12.): our own messages reach every subscribed peer.

A real node's gossipsub router, not started: its topic peers and mesh are set as a
heartbeat would leave them just after a peer subscribed and before it was grafted.
"""

from __future__ import annotations

from libp2p.peer.id import ID

from node.net.gossip_config import MESHSUB_PROTOCOL
from protocol.identity import Identity
from protocol.topics import SKILLS
from tests.support.net import make_net


def _peer() -> ID:
    return ID.from_base58(Identity.generate().peer_id)


def test_our_own_message_goes_to_subscribers_outside_the_mesh_and_a_forwarded_one_does_not() -> None:
    net = make_net()
    router, pubsub = net.router, net.pubsub
    topic = net.gossip.wire_topic(SKILLS)
    meshed, joined, other_topic_peer = _peer(), _peer(), _peer()
    for peer in (meshed, joined, other_topic_peer):
        router.peer_protocol[peer] = MESHSUB_PROTOCOL
    pubsub.peer_topics[topic] = {meshed, joined}
    pubsub.peer_topics["/elsewhere"] = {other_topic_peer}
    router.mesh[topic] = {meshed}  # ``joined`` subscribed; no heartbeat has grafted it yet

    ours = set(router._get_peers_to_send([topic], msg_forwarder=pubsub.my_id, origin=pubsub.my_id))
    assert ours == {meshed, joined}

    forwarder = meshed
    origin = _peer()
    forwarded = set(router._get_peers_to_send([topic], msg_forwarder=forwarder, origin=origin))
    assert forwarded == set()  # a forwarded message stays on the mesh (minus its forwarder)
