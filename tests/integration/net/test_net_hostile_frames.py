"""Raw pubsub RPC frames from a foreign peer over a real Noise connection: a frame the
py-libp2p signature path cannot parse (issue 11, row 1) or any generated frame costs the
sender, never the node, which keeps serving and gossiping."""

from __future__ import annotations

import time

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libp2p.pubsub.pb import rpc_pb2
from libp2p.utils import encode_varint_prefixed

from node.net.rules.scoring import ScoringConfig
from node.net.service import NetService
from protocol.topics import SKILLS
from tests.support.net import Inbox, make_listing, start_mesh
from tests.support.wait import wait_until_async

NO_BANS = ScoringConfig(ban_threshold=-1e9)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def crafted_frame() -> bytes:
    """One publish whose ``from`` is no Ed25519 peer id and whose ``key`` is undecodable."""
    rpc = rpc_pb2.RPC()
    message = rpc.publish.add()
    message.from_id = b"\x01\x02not-a-peer-id"
    message.data = b"\xa1\x00\x00"
    message.seqno = b"\x00" * 8
    message.topicIDs.append(SKILLS)
    message.signature = b"\x00" * 64
    message.key = b"\xff\xfe\xfd undecodable key"
    return encode_varint_prefixed(rpc.SerializeToString())


async def send_raw(attacker: NetService, victim: NetService, frame: bytes) -> None:
    """Write ``frame`` on the attacker's own pubsub stream to the victim (as any peer can)."""
    peer = next(p for p in attacker.pubsub.peers if str(p) == victim.peer_id)
    await attacker.pubsub.peers[peer].write(frame)


async def still_gossips(nets: list[NetService], inbox: Inbox, name: str) -> None:
    sent = await nets[2].publish(SKILLS, make_listing(nets[2].identity, name=name, now_ms=now_ms()))
    await wait_until_async(lambda: any(e.seq == sent.seq and e.sender == sent.sender
                                       for e in inbox.listings), 30, f"listing {name} at the victim")


async def test_unparseable_signature_key_does_not_stop_the_node(nursery: trio.Nursery) -> None:
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)

    for _ in range(3):
        await send_raw(attacker, victim, crafted_frame())
    await still_gossips(nets, inbox, "after-crafted-frame")
    assert victim.pubsub.manager.is_running


RAW_MESSAGES = st.builds(
    lambda frm, data, seqno, topics, sig, key: (frm, data, seqno, topics, sig, key),
    st.binary(max_size=48), st.binary(max_size=256), st.binary(max_size=12),
    st.lists(st.sampled_from([SKILLS, "/crystalmesh/1/weather", "x", ""]), max_size=3),
    st.binary(max_size=80), st.binary(max_size=48),
)


async def test_generated_rpc_frames_do_not_stop_the_node(nursery: trio.Nursery) -> None:
    nets = await start_mesh(nursery, 3, scoring=NO_BANS)
    victim, attacker = nets[0], nets[1]
    inbox = Inbox()
    inbox.attach(victim)
    frames: list[bytes] = []

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(RAW_MESSAGES, min_size=1, max_size=4), st.binary(max_size=64))
    def collect(messages: list[tuple[bytes, bytes, bytes, list[str], bytes, bytes]],
                garbage: bytes) -> None:
        rpc = rpc_pb2.RPC()
        for frm, data, seqno, topics, sig, key in messages:
            message = rpc.publish.add()
            message.from_id, message.data, message.seqno = frm, data, seqno
            message.topicIDs.extend(topics)
            message.signature, message.key = sig, key
        frames.append(encode_varint_prefixed(rpc.SerializeToString()))
        frames.append(encode_varint_prefixed(garbage))

    collect()
    for frame in frames:
        try:
            await send_raw(attacker, victim, frame)
        except (StopIteration, Exception):
            break  # the victim may cut the attacker's stream for a garbage frame
    await still_gossips(nets, inbox, "after-generated-frames")
    assert victim.pubsub.manager.is_running
