"""Connections: Noise only, reconnect with backoff, score-based and manual bans."""

from __future__ import annotations

import time

import multiaddr
import pytest
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.custom_types import TProtocol
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.security.insecure.transport import PLAINTEXT_PROTOCOL_ID, InsecureTransport

from node.net.host import connection_config, to_peer_id, yamux_only
from node.net.rules.scoring import ScoringConfig
from protocol.envelope import seal
from protocol.topics import GOSSIP_TOPICS, SKILLS
from tests.support.net import Inbox, make_listing, make_net, start_mesh
from tests.support.wait import wait_until_async


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_plaintext_connections_are_refused(nursery: trio.Nursery) -> None:
    node = make_net()
    await nursery.start(node.run)
    key_pair = create_new_key_pair()
    plaintext = new_host(
        key_pair=key_pair,
        sec_opt={TProtocol(PLAINTEXT_PROTOCOL_ID): InsecureTransport(key_pair)},
        muxer_opt=yamux_only(),
        connection_config=connection_config(dial_timeout_s=2.0),
    )
    async with plaintext.run([multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        with pytest.raises(Exception), trio.fail_after(10):  # noqa: B017 - any dial failure
            await plaintext.connect(info_from_p2p_addr(multiaddr.Multiaddr(node.listen_addrs()[0])))
        assert str(plaintext.get_id()) not in node.connected_peers()


async def test_dropped_bootstrap_connection_is_redialled(nursery: trio.Nursery) -> None:
    first = make_net()
    await nursery.start(first.run)
    second = make_net(bootstrap=[first.listen_addrs()[0]])
    await nursery.start(second.run)
    await wait_until_async(lambda: first.peer_id in second.connected_peers(), 60, "bootstrap dial")

    first_id = to_peer_id(first.peer_id)
    [dropped] = second.host.get_network().connections[first_id]
    await first.host.disconnect(to_peer_id(second.peer_id))
    await wait_until_async(lambda: dropped.is_closed, 60, "drop seen")

    def redialled() -> bool:  # a new connection (it may come before the old one is unlisted)
        listed = second.host.get_network().connections.get(first_id, []) or []
        return any(conn is not dropped and not conn.is_closed for conn in listed)

    await wait_until_async(redialled, 60, "redial")
    status = {peer.peer_id: peer for peer in second.peers()}[first.peer_id]
    assert status.connected and status.kept and not status.banned
    assert any(addr.startswith("/ip4/127.0.0.1/tcp/") for addr in status.addrs)


async def test_peer_sending_forgeries_is_disconnected_and_stays_out(
    nursery: trio.Nursery,
) -> None:
    nets = await start_mesh(nursery, 3, scoring=ScoringConfig(ban_threshold=-50.0))
    inboxes = [Inbox() for _ in nets]
    for net, inbox in zip(nets, inboxes, strict=True):
        inbox.attach(net)
    attacker = make_net(bootstrap=[net.listen_addrs()[0] for net in nets])
    for topic in GOSSIP_TOPICS:
        attacker.pubsub.remove_topic_validator(topic)
    await nursery.start(attacker.run)
    await wait_until_async(
              lambda: len(attacker.mesh_peers(SKILLS)) == len(nets), 60, "attacker in the mesh"
    )

    me = attacker.identity
    for index in range(3):  # 3 x bad_signature (20 each) crosses -50
        data = bytearray(
            seal(me, "skill_listing", make_listing(me, f"x{index}", now_ms()), index + 1, now_ms())
        )
        data[-3] ^= 0x01
        await attacker.pubsub.publish(SKILLS, bytes(data))

    await wait_until_async(
              lambda: all(net.is_banned(attacker.peer_id) for net in nets), 60, "banned everywhere"
    )
    attacker_id = to_peer_id(attacker.peer_id)

    def shut_out() -> bool:  # no honest node holds a live connection to it
        return not any(net.peer_manager.is_connected(attacker_id) for net in nets)

    await wait_until_async(shut_out, 60, "attacker disconnected")
    for net in nets:
        assert net.score(attacker.peer_id) < -50
        assert net.rejection_counts(attacker.peer_id) == {"bad_signature": 3}
        assert {peer.peer_id: peer for peer in net.peers()}[attacker.peer_id].banned
    assert all(inbox.total() == 0 for inbox in inboxes)

    # Its bootstrap loop redials; every node drops the connection on arrival.
    await wait_until_async(
              lambda: all(net.peer_manager.refused_connections >= 1 for net in nets), 60, "redial"
    )
    await wait_until_async(shut_out, 60, "attacker dropped again")


async def test_manual_ban_disconnects_and_unban_allows_back(nursery: trio.Nursery) -> None:
    nets = await start_mesh(nursery, 2)
    keeper, other = nets[1], nets[0]  # nets[1] bootstrapped from nets[0]
    other.ban(keeper.peer_id)
    await wait_until_async(lambda: keeper.peer_id not in other.connected_peers(), 60, "ban disconnect")
    assert other.is_banned(keeper.peer_id)

    other.unban(keeper.peer_id)
    await wait_until_async(lambda: keeper.peer_id in other.connected_peers(), 60, "redial after unban")


async def test_a_peer_that_drops_us_on_arrival_is_redialled_ever_more_slowly(
    nursery: trio.Nursery,
) -> None:
    """Each dial to a peer that bans us connects and is dropped at once: that is not a
    good connection, so the backoff grows instead of starting again at 1 s (a loop of
    dials, and of refusals at the peer)."""
    keeper = make_net()
    await nursery.start(keeper.run)
    kept_by = make_net(bootstrap=[keeper.listen_addrs()[0]], reconnect_max_backoff_s=30.0)
    keeper.ban(kept_by.peer_id)
    await nursery.start(kept_by.run)
    keeper_id = to_peer_id(keeper.peer_id)
    await wait_until_async(lambda: (kept_by.peer_manager.backoff_s(keeper_id) or 0) >= 8.0, 60,
                           "the backoff grown to 8 s (1 + 2 + 4 s of refused dials)")
    assert keeper.peer_manager.refused_connections >= 3
    # 1 s, 2 s, 4 s: about four dials of ours (a dial may also fail while it is refused).
    assert kept_by.peer_manager.dial_attempts <= 6


async def test_refusing_a_banned_peer_leaves_it_no_half_open_connection(
    nursery: trio.Nursery,
) -> None:
    """py-libp2p's ``close_peer`` drops the whole list after closing what it listed: a
    connection registered meanwhile stayed open, unlisted here and live at the banned
    peer, which then believed itself connected and never dialled again."""
    keeper = make_net()
    await nursery.start(keeper.run)
    banned = make_net(bootstrap=[keeper.listen_addrs()[0]])
    keeper.ban(banned.peer_id)
    await nursery.start(banned.run)
    keeper_id = to_peer_id(keeper.peer_id)
    await wait_until_async(lambda: keeper.peer_manager.refused_connections >= 3, 60, "refusals")
    await wait_until_async(lambda: not banned.peer_manager.is_connected(keeper_id), 60,
                           "the banned peer sees no live connection")
    live_at_keeper = [conn for conn in keeper.host.get_network().connections.get(
        to_peer_id(banned.peer_id), []) if not conn.is_closed]
    assert live_at_keeper == []
