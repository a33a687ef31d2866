"""Listings that do not flood: shard topics, DHT provider records, sync from found sellers.

Real py-libp2p hosts in one trio run (tests/support/net.py), ``net.listing_shards = 16``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import trio
from libp2p.kad_dht.pb.kademlia_pb2 import Message
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.utils.varint import encode_varint_prefixed, read_varint_prefixed_bytes
from multiaddr import Multiaddr

from node.net.listing_sync import SyncSource
from node.net.rules.scoring import ScoringConfig
from node.net.service import NetService
from node.net.shards import WRONG_SHARD
from protocol.envelope import seal
from protocol.identity import Identity
from protocol.messages import SkillListing
from protocol.topics import SKILLS, listing_shard, provider_key
from tests.support.net import Inbox, make_listing, make_net
from tests.support.wait import wait_until_async

SHARDS = 16
NO_BANS = ScoringConfig(ban_threshold=-1e9)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def two_categories() -> tuple[str, str]:
    """Two categories on different shards of 16."""
    first = "tools"
    for index in range(100):
        other = f"category-{index}"
        if listing_shard(other, SHARDS) != listing_shard(first, SHARDS):
            return first, other
    raise AssertionError("no second shard")


def listing_in(seller: Identity, name: str, category: str) -> SkillListing:
    return dataclasses.replace(make_listing(seller, name, now_ms()), category=category,
                               tags=(category,))


async def start(nursery: trio.Nursery, interests: tuple[str, ...], bootstrap: list[NetService],
                **overrides: object) -> NetService:
    net = make_net(bootstrap=[peer.listen_addrs()[0] for peer in bootstrap], interests=interests,
                   listing_shards=SHARDS, **overrides)  # type: ignore[arg-type]
    await nursery.start(net.run)
    return net


async def test_a_node_receives_the_listings_of_its_shards_only(nursery: trio.Nursery) -> None:
    alpha, beta = two_categories()
    seller = await start(nursery, (alpha, beta), [], scoring=NO_BANS)
    follower = await start(nursery, (alpha,), [seller])  # follows alpha only
    everything = await start(nursery, ("*",), [seller, follower])
    inboxes = {net.peer_id: Inbox() for net in (seller, follower, everything)}
    for net in (seller, follower, everything):
        inboxes[net.peer_id].attach(net)
    assert follower.shards is not None and everything.shards is not None
    assert follower.shards.joined == {listing_shard(alpha, SHARDS)}
    alpha_topic = follower.shards.topic(listing_shard(alpha, SHARDS))
    beta_topic = follower.shards.topic(listing_shard(beta, SHARDS))
    await wait_until_async(lambda: len(seller.topic_peers(alpha_topic)) == 2
                           and len(seller.topic_peers(beta_topic)) == 1, 30,
                           "both peers on the alpha shard, one on beta")

    await seller.publish(SKILLS, listing_in(seller.identity, "in-alpha", alpha))
    await seller.publish(SKILLS, listing_in(seller.identity, "in-beta", beta))

    def names(net: NetService) -> set[str]:
        return {envelope.body["name"] for envelope in inboxes[net.peer_id].listings}

    await wait_until_async(lambda: names(everything) == {"in-alpha", "in-beta"}, 30,
                           "both listings at the node that follows every shard")
    await wait_until_async(lambda: "in-alpha" in names(follower), 30, "alpha at its follower")
    # The beta listing reached the whole beta shard (above) and never the alpha-only node.
    assert names(follower) == {"in-alpha"}
    assert follower.peer_id not in seller.mesh_peers(beta_topic) + seller.topic_peers(beta_topic)

    # A listing gossiped on a shard its category does not hash to is rejected, not delivered.
    wire = seller.shards.wire_topic(listing_shard(alpha, SHARDS))  # type: ignore[union-attr]
    seller.pubsub.remove_topic_validator(wire)  # the seller turns hostile: skips its own check
    misplaced = listing_in(seller.identity, "misplaced", beta)
    data = seal(seller.identity, SkillListing.KIND, misplaced, seller.sequence.next(), now_ms())
    await seller.pubsub.publish(wire, data)
    await wait_until_async(
        lambda: follower.rejection_counts(seller.peer_id).get(WRONG_SHARD, 0) >= 1, 30,
        "the misplaced listing rejected by the alpha follower")
    assert "misplaced" not in names(follower)


def sync_source(entries: list[bytes]) -> SyncSource:
    async def source(cursor: int, limit: int, max_bytes: int, scope: object = None) -> tuple[list[bytes], int, bool]:
        page = entries[cursor:cursor + limit]
        return page, cursor + len(page), cursor + len(page) < len(entries)

    return source


async def test_a_buyer_finds_sellers_through_the_dht_and_syncs_their_listings(
    nursery: trio.Nursery,
) -> None:
    alpha, other = two_categories()
    seller_identity = Identity.generate()
    honest = seal(seller_identity, SkillListing.KIND,
                  listing_in(seller_identity, "wanted-skill", alpha), 1, now_ms())
    # A hostile provider of the same category: its sync pages carry a forged listing
    # (body changed after signing) and garbage.
    forged_identity = Identity.generate()
    forged = bytearray(seal(forged_identity, SkillListing.KIND,
                            listing_in(forged_identity, "forged-skill", alpha), 1, now_ms()))
    forged[-70] ^= 0x01
    hub = await start(nursery, (other,), [])
    seller = make_net(seller_identity, bootstrap=[hub.listen_addrs()[0]], interests=(alpha,),
                      listing_shards=SHARDS)
    seller.serve_listings_sync(sync_source([honest]))
    await nursery.start(seller.run)
    hostile = make_net(bootstrap=[hub.listen_addrs()[0]], interests=(alpha,), listing_shards=SHARDS)
    hostile.serve_listings_sync(sync_source([bytes(forged), b"\x00garbage"]))
    await nursery.start(hostile.run)
    # The buyer follows another category: it is on none of alpha's shard topics.
    buyer = await start(nursery, (other,), [hub], scoring=NO_BANS)
    inbox = Inbox()
    inbox.attach(buyer)
    assert buyer.shards is not None and listing_shard(alpha, SHARDS) not in buyer.shards.joined

    assert seller.advertise([alpha]) == 1 and hostile.advertise([alpha]) == 1
    assert hub.discovery is not None
    key = provider_key(alpha)
    await wait_until_async(lambda: len(hub.discovery.dht.provider_store.get_providers(key)) == 2,  # type: ignore[union-attr]
                           60, "both provider records held by the hub")
    # Discovery may connect the buyer to the seller, but off alpha's shard nothing arrives.
    assert inbox.listings == []

    report = await buyer.ask_network([alpha.upper()], timeout_s=30)

    assert report["providers"] == 2 and not report["timed_out"], report
    assert report["accepted"] == 1 and report["rejected"] >= 1, report
    assert [envelope.body["name"] for envelope in inbox.listings] == ["wanted-skill"]
    assert buyer.score(hostile.peer_id) < 0 and buyer.score(seller.peer_id) == 0


async def test_provider_records_a_peer_can_leave_are_bounded(nursery: trio.Nursery) -> None:
    hub = await start(nursery, ("*",), [])
    assert hub.discovery is not None and hub.providers is not None
    store = hub.discovery.dht.provider_store
    flooder = PeerInfo(ID.from_base58(Identity.generate().peer_id),
                       [Multiaddr("/ip4/127.0.0.1/tcp/1")])
    # What the library's ADD_PROVIDER handler calls for each accepted record.
    for index in range(500):
        store.add_provider(provider_key(f"term-{index}"), flooder)
    limits = hub.providers.limits
    assert store.size() == limits.max_keys_per_provider
    others = [PeerInfo(ID.from_base58(Identity.generate().peer_id),
                       [Multiaddr("/ip4/127.0.0.1/tcp/2")]) for _ in range(100)]
    for index in range(limits.max_keys + 100):
        store.add_provider(provider_key(f"other-{index}"), others[index % 100])
    assert len(store.providers) == limits.max_keys  # the oldest keys made room
    assert provider_key("other-0") not in store.providers
    # A lookup answers at most ``count`` providers and never names us.
    found = await hub.providers.find(provider_key(f"other-{limits.max_keys + 99}"), count=3)
    assert 1 <= len(found) <= 3 and all(str(p.peer_id) != hub.peer_id for p in found)


async def test_a_hostile_providers_answer_is_bounded_and_never_stored(
    nursery: trio.Nursery,
) -> None:
    """A peer answers every GET_PROVIDERS with 300 made-up providers: the lookup keeps a
    few, stores none (later lookups are not poisoned), and the search ends in time."""
    attacker = await start(nursery, ("*",), [])
    buyer = await start(nursery, ("other",), [attacker], scoring=NO_BANS)
    assert attacker.discovery is not None and buyer.providers is not None
    protocol = attacker.discovery.dht.host.protocol_id  # type: ignore[attr-defined]
    made_up = [Identity.generate().peer_id for _ in range(300)]

    async def answer(stream: Any) -> None:
        request = Message()
        request.ParseFromString(await read_varint_prefixed_bytes(stream))
        reply = Message(type=Message.MessageType.GET_PROVIDERS, key=request.key)
        for peer_id in made_up:
            provider = reply.providerPeers.add()
            provider.id = ID.from_base58(peer_id).to_bytes()
            provider.addrs.append(Multiaddr("/ip4/127.0.0.1/tcp/1").to_bytes())
        await stream.write(encode_varint_prefixed(reply.SerializeToString()))
        await stream.close()

    attacker.host.set_stream_handler(protocol, answer)
    await wait_until_async(lambda: buyer.discovery is not None
                           and buyer.discovery.dht.routing_table.size() >= 1, 30,
                           "the attacker in the buyer's routing table")
    key = provider_key("tools")

    found = await buyer.providers.find(key, count=5)

    assert len(found) == 5 and all(str(p.peer_id) in made_up for p in found)
    assert buyer.discovery.dht.provider_store.get_providers(key) == []  # type: ignore[union-attr]
    report = await buyer.ask_network(["tools"], timeout_s=10, max_sellers=5)
    assert report["providers"] == 5 and report["accepted"] == 0, report
    assert attacker.peer_id in buyer.connected_peers()  # nothing the answer did cut us off
