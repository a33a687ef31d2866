"""What a gossip message costs a node (issue 27), over real hosts and real connections:
yamux credits half a window at a time, a burst of RPCs costs a few stream reads, a
duplicate stops at the read loop, a unique message is handled without a task of its
own, a forwarded message is serialised once for all mesh peers, and the pubsub
signature still binds ``from``.

Raw frames are written on a foreign peer's own pubsub stream to the victim, as any
connected peer can (see test_net_hostile_frames.py)."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from typing import Any

import pytest
import trio
from libp2p.network.stream.net_stream import NetStream
from libp2p.peer.id import ID
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.validators import PUBSUB_SIGNING_PREFIX
from libp2p.utils import encode_varint_prefixed

from node.net.gossip_config import message_id
from node.net.libp2p_tuning import cached_local_record
from node.net.rules.scoring import ScoringConfig
from node.net.service import NetService
from protocol.envelope import seal
from protocol.identity import Identity
from protocol.messages import SkillListing
from protocol.topics import SKILLS
from tests.support.net import Inbox, make_listing, start_mesh
from tests.support.wait import wait_until_async

NO_BANS = ScoringConfig(ban_threshold=-1e9)
WINDOW_PROTOCOL = "/crystalmesh-test/window/1"
_seqnos = itertools.count(1)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sealed_listing(identity: Identity, name: str) -> bytes:
    issued = now_ms()
    listing = make_listing(identity, name=name, now_ms=issued)
    return seal(identity, SkillListing.KIND, listing, issued * 1000, issued)


def pubsub_message(signer: NetService, data: bytes, *, sign: bool = True,
                   claimed_from: bytes | None = None) -> rpc_pb2.Message:
    """A pubsub message from ``signer`` (or claiming ``claimed_from``), signed by ``signer``."""
    message = rpc_pb2.Message(
        data=data,
        topicIDs=[signer.gossip.wire_topic(SKILLS)],
        from_id=claimed_from if claimed_from is not None else signer.host.get_id().to_bytes(),
        seqno=next(_seqnos).to_bytes(8, "big"),
    )
    if sign:
        payload = PUBSUB_SIGNING_PREFIX.encode() + message.SerializeToString()
        message.signature = signer.host.get_private_key().sign(payload)
    return message


def frame(*messages: rpc_pb2.Message) -> bytes:
    return encode_varint_prefixed(rpc_pb2.RPC(publish=list(messages)).SerializeToString())


async def send_raw(attacker: NetService, victim: NetService, data: bytes) -> None:
    peer = next(p for p in attacker.pubsub.peers if str(p) == victim.peer_id)
    await attacker.pubsub.peers[peer].write(data)


def delivered(inbox: Inbox, data: bytes) -> int:
    return sum(1 for envelope in inbox.listings if envelope.to_bytes() == data)


async def test_yamux_credits_half_a_window_not_every_read(nursery: trio.Nursery) -> None:
    """100 KiB read in 512-byte reads sends no WINDOW_UPDATE (py-libp2p 0.8.1 sent one per
    read); 1 MiB more still flows, so the credit does come, once per half window."""
    writer, reader = await start_mesh(nursery, 2)
    updates = Counter[str]()
    received = bytearray()
    done = trio.Event()

    async def handler(stream: Any) -> None:
        muxed = stream.muxed_stream
        original = muxed.send_window_update

        async def counted(increment: int, skip_lock: bool = False) -> None:
            updates["sent"] += 1
            await original(increment, skip_lock)

        muxed.send_window_update = counted
        while len(received) < 100 * 1024:
            received.extend(await stream.read(512))
        updates["after_100k"] = updates["sent"]
        while len(received) < 1124 * 1024:
            received.extend(await stream.read(512))
        done.set()

    reader.host.set_stream_handler(WINDOW_PROTOCOL, handler)
    stream = await writer.host.new_stream(ID.from_base58(reader.peer_id), [WINDOW_PROTOCOL])
    chunk = b"x" * 512
    with trio.fail_after(60):
        for _ in range(1124 * 2):
            await stream.write(chunk)
        await done.wait()
    assert len(received) == 1124 * 1024
    assert updates["after_100k"] == 0, updates
    assert 1 <= updates["sent"] <= 16, updates  # one per half window (128 KiB) at most


async def test_a_burst_of_rpcs_costs_a_few_stream_reads(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)
    datas = [sealed_listing(Identity.generate(), f"burst-{index}") for index in range(20)]
    burst = b"".join(frame(pubsub_message(attacker, data)) for data in datas)
    reads = Counter[str]()
    original = NetStream.read

    async def counted(self: NetStream, n: int | None = None) -> bytes:
        # Pubsub reads of what the attacker sent (it publishes nothing else meanwhile).
        if str(self.muxed_conn.peer_id) == attacker.peer_id \
                and str(self.get_protocol()).startswith("/meshsub/"):
            reads["from_attacker"] += 1
        return await original(self, n)

    monkeypatch.setattr(NetStream, "read", counted)
    await send_raw(attacker, victim, burst)
    await wait_until_async(lambda: all(delivered(inbox, data) == 1 for data in datas), 30,
                           "the burst at the victim")
    # Unbuffered: a varint byte and a body per RPC, i.e. 40 reads at the victim alone.
    assert reads["from_attacker"] < 10, reads


async def test_duplicates_stop_before_the_push_path(nursery: trio.Nursery) -> None:
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)
    pushed = Counter[bytes]()
    original = victim.pubsub.push_msg

    async def counted(forwarder: ID, message: rpc_pb2.Message) -> None:
        pushed[message_id(message)] += 1
        await original(forwarder, message)

    victim.pubsub.push_msg = counted  # type: ignore[method-assign]
    data = sealed_listing(Identity.generate(), "duplicated")
    copy = pubsub_message(attacker, data)
    await send_raw(attacker, victim, frame(copy))
    await wait_until_async(lambda: delivered(inbox, data) == 1, 30, "the first copy")
    for _ in range(5):  # the same message again, and under new seqnos (a replay)
        await send_raw(attacker, victim, frame(copy, pubsub_message(attacker, data)))
    marker = sealed_listing(Identity.generate(), "marker")
    await send_raw(attacker, victim, frame(pubsub_message(attacker, marker)))
    # One stream, read in order: once the marker is in, every copy was read.
    await wait_until_async(lambda: delivered(inbox, marker) == 1, 30, "the marker")
    assert delivered(inbox, data) == 1
    assert pushed[message_id(copy)] == 1, pushed


async def test_a_unique_message_is_handled_without_a_task_of_its_own(
    nursery: trio.Nursery,
) -> None:
    """py-libp2p 0.8.1 spawned a service task per received message to run ``push_msg``;
    the read loop now awaits it (libp2p_tuning, 9.). In order, each delivered once."""
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)
    spawned = Counter[str]()
    manager = victim.pubsub.manager
    original = manager.run_task

    def counted(function: Any, *args: Any, **kwargs: Any) -> None:
        spawned[getattr(function, "__name__", repr(function))] += 1
        original(function, *args, **kwargs)

    manager.run_task = counted  # type: ignore[method-assign]
    datas = [sealed_listing(Identity.generate(), f"inline-{index}") for index in range(10)]
    for data in datas:
        await send_raw(attacker, victim, frame(pubsub_message(attacker, data)))
    await wait_until_async(lambda: all(delivered(inbox, data) == 1 for data in datas), 30,
                           "the ten listings at the victim")
    assert spawned["push_msg"] == 0, spawned
    order = [envelope.to_bytes() for envelope in inbox.listings]
    assert [order.index(data) for data in datas] == sorted(order.index(data) for data in datas)


async def test_a_forwarded_message_is_serialised_once_per_node(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five nodes, full mesh: each message is written 12 times (the origin to 4 peers, each
    relay to the 2 that are neither its forwarder nor the origin); the library built each
    of those frames anew, now a node builds one and writes it to all (libp2p_tuning, 10.),
    so at most five distinct frames carry a message."""
    nets = await start_mesh(nursery, 5, scoring=NO_BANS)
    inboxes = [Inbox() for _ in nets]
    for inbox, net in zip(inboxes, nets, strict=True):
        inbox.attach(net)
    datas = [sealed_listing(Identity.generate(), f"shared-{index}") for index in range(5)]
    writes = Counter[bytes]()
    frames: dict[bytes, dict[int, bytes]] = {data: {} for data in datas}
    original = NetStream.write

    async def counted(self: NetStream, data: bytes) -> None:
        if str(self.get_protocol()).startswith("/meshsub/"):
            for listing in datas:
                if listing in data:
                    writes[listing] += 1
                    frames[listing][id(data)] = data  # held: ids stay distinct
        await original(self, data)

    monkeypatch.setattr(NetStream, "write", counted)
    relayed = len(nets) - 1 + (len(nets) - 1) * (len(nets) - 3)
    for data in datas:  # one at a time: each write carries one message (see the next test)
        await nets[0].gossip.publish_sealed(SKILLS, data)
        await wait_until_async(
            lambda data=data: writes[data] >= relayed  # type: ignore[misc]
            and all(delivered(inbox, data) == 1 for inbox in inboxes[1:]),
            30, "the listing everywhere",
        )
    for data in datas:
        assert len(frames[data]) <= len(nets), (writes[data], len(frames[data]))


async def test_a_burst_is_forwarded_in_a_few_writes(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 RPCs read together are forwarded to a mesh peer in a few stream writes (one
    yamux frame, one Noise message, one socket send each), not 20 (libp2p_tuning, 11.),
    and arrive whole and in order."""
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker, third = nets
    inbox = Inbox()
    inbox.attach(third)
    datas = [sealed_listing(Identity.generate(), f"batched-{index}") for index in range(20)]
    writes = Counter[str]()
    original = NetStream.write

    async def counted(self: NetStream, data: bytes) -> None:
        # Only the victim forwards these to the third node: the attacker wrote them raw to
        # the victim alone, and the third node does not send them back to their origin.
        if str(self.muxed_conn.peer_id) == third.peer_id \
                and str(self.get_protocol()).startswith("/meshsub/") \
                and any(listing in data for listing in datas):
            writes["to_third"] += 1
        await original(self, data)

    monkeypatch.setattr(NetStream, "write", counted)
    await send_raw(attacker, victim, b"".join(frame(pubsub_message(attacker, data))
                                              for data in datas))
    await wait_until_async(lambda: all(delivered(inbox, data) == 1 for data in datas), 30,
                           "the burst at the third node")
    assert writes["to_third"] < 10, writes
    order = [envelope.to_bytes() for envelope in inbox.listings]
    assert [order.index(data) for data in datas] == sorted(order.index(data) for data in datas)


async def test_an_unsigned_or_misbound_message_is_dropped_and_poisons_nothing(
    nursery: trio.Nursery,
) -> None:
    """StrictSign stays (docs/protocol.md): a message whose pubsub signature is missing, or
    whose ``from`` is another peer than its signer, is dropped before our validator, so it
    neither reaches a handler nor marks the envelope seen or invalid for the honest copy."""
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker, origin = nets
    inbox = Inbox()
    inbox.attach(victim)
    data = sealed_listing(origin.identity, "forged-wrapping")
    origin_id = origin.host.get_id().to_bytes()
    await send_raw(attacker, victim, frame(
        pubsub_message(attacker, data, sign=False),
        pubsub_message(attacker, data, sign=False, claimed_from=origin_id),
        pubsub_message(attacker, data, claimed_from=origin_id),
    ))
    marker = sealed_listing(Identity.generate(), "marker")
    await send_raw(attacker, victim, frame(pubsub_message(attacker, marker)))
    await wait_until_async(lambda: delivered(inbox, marker) == 1, 30, "the marker")
    assert delivered(inbox, data) == 0

    await origin.gossip.publish_sealed(SKILLS, data)
    await wait_until_async(lambda: delivered(inbox, data) == 1, 30, "the honest copy")
    assert victim.pubsub.manager.is_running


def test_our_signed_peer_record_is_built_once_per_second_per_host() -> None:
    class Host:
        pass

    built = Counter[int]()
    clock = [100.0]

    def build(host: Host) -> tuple[bytes, bool]:
        built[id(host)] += 1
        return f"record-{built[id(host)]}".encode(), True

    cached = cached_local_record(build, ttl_s=1.0, clock=lambda: clock[0])
    first, second = Host(), Host()
    assert [cached(first) for _ in range(100)][-1] == (b"record-1", False)
    assert cached(second) == (b"record-1", True)
    clock[0] += 1.0
    assert cached(first) == (b"record-2", True)
    assert built[id(first)] == 2 and built[id(second)] == 1


async def test_our_own_publish_is_opened_once(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing checks our envelope once, in the validator on the way out; the envelope
    ``publish_sealed`` returns is that one, not opened (CBOR, Ed25519) a second time."""
    import node.net.gossip as gossip_module

    [publisher, _] = await start_mesh(nursery, 2, scoring=NO_BANS)
    opened_again = Counter[int]()
    original = gossip_module.open_envelope

    def counting_open(data: bytes, max_bytes: int) -> Any:
        opened_again[len(data)] += 1
        return original(data, max_bytes)

    monkeypatch.setattr(gossip_module, "open_envelope", counting_open)
    seller = Identity.generate()
    data = sealed_listing(seller, "opened-once")
    envelope = await publisher.gossip.publish_sealed(SKILLS, data)
    assert sum(opened_again.values()) == 0
    assert envelope == original(data, publisher.validator.max_message_bytes)
    assert envelope.sender == seller.public_key
    assert publisher.gossip._own_accepted == {}


async def test_a_burst_larger_than_the_librarys_subscription_queue_is_delivered(
    nursery: trio.Nursery,
) -> None:
    """100 listings read together are handled in the read loop one after another (cuts 6
    and 9); 0.8.1's 32-slot subscription queue between the read loop and our drain task
    dropped all but the first 32 ("fail to deliver message to subscription")."""
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)
    datas = [sealed_listing(Identity.generate(), f"wave-{index}") for index in range(100)]
    await send_raw(attacker, victim, b"".join(frame(pubsub_message(attacker, data))
                                              for data in datas))
    await wait_until_async(lambda: all(delivered(inbox, data) == 1 for data in datas), 30,
                           "the whole burst at the victim")
    assert victim.gossip.dropped == 0
