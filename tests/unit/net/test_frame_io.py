"""Frames in and out of a real TCP connection with fewer syscalls and trio passes
(node.net.libp2p_tuning, 19., 20., 23., 25. and 26.): Noise messages that arrived together
cost one receive, not two per message, and a yamux frame written on a quiet stream costs one
schedule point (its socket send), not one per lock it goes through; pubsub RPCs are cut from
the read buffer under the library's limits. Same bytes, same order.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from libp2p.custom_types import TProtocol
from libp2p.io.exceptions import IncompleteReadError, MessageTooLarge
from libp2p.io.trio import TrioTCPStream
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.security.noise.io import NoisePacketReadWriter
from libp2p.stream_muxer.yamux.yamux import Yamux
from libp2p.utils import encode_uvarint, encode_varint_prefixed
from multiaddr import Multiaddr

from node.net import libp2p_tuning
from node.net.libp2p_tuning.frames import _PromptLock
from node.net.libp2p_tuning.pubsub_receive import _BufferedStream
from tests.support.net import make_net, start_mesh

FRAMES_PROTOCOL = TProtocol("/crystalmesh-test/frames/1")


class CountingStream(trio.abc.Stream):
    """A real trio socket stream that counts the receives it is asked for."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner
        self.receives = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        self.receives += 1
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        await self.inner.send_all(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def tcp_pair(nursery: trio.Nursery) -> tuple[trio.SocketStream, trio.SocketStream]:
    accepted: list[trio.SocketStream] = []
    ready = trio.Event()

    async def handler(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        ready.set()
        await trio.sleep_forever()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    await ready.wait()
    return client, accepted[0]


async def test_noise_messages_that_arrived_together_cost_one_receive(
    nursery: trio.Nursery,
) -> None:
    libp2p_tuning.apply()
    sender, receiver = await tcp_pair(nursery)
    counting = CountingStream(receiver)
    reader = NoisePacketReadWriter(TrioTCPStream(counting))  # type: ignore[arg-type]
    bodies = [bytes([index]) * (700 + index) for index in range(5)]
    await sender.send_all(b"".join(len(body).to_bytes(2, "big") + body for body in bodies))
    with trio.fail_after(10):
        got = [await reader.read_msg() for _ in bodies]
    assert got == bodies
    # The library: a receive for each length prefix and one for each body (10 here).
    assert counting.receives == 1, counting.receives


async def test_buffered_reads_return_the_same_bytes_in_order_then_eof(
    nursery: trio.Nursery,
) -> None:
    libp2p_tuning.apply()
    sender, receiver = await tcp_pair(nursery)
    tcp = TrioTCPStream(receiver)
    rng = random.Random(38)
    payload = rng.randbytes(300_000)

    async def send() -> None:
        for start in range(0, len(payload), 7_000):
            await sender.send_all(payload[start:start + 7_000])
        await sender.aclose()

    nursery.start_soon(send)
    got = bytearray()
    with trio.fail_after(20):
        while True:
            size = rng.choice([None, 1, 2, 12, 700, 5_000, 70_000])
            chunk = await tcp.read(size)
            if not chunk:
                break
            assert size is None or len(chunk) <= size
            got.extend(chunk)
    assert bytes(got) == payload
    assert await tcp.read(0) == b""


class StepCounter(trio.abc.Instrument):
    """Counts how often one task is resumed by the scheduler while ``counting`` is on."""

    def __init__(self, task: Any) -> None:
        self.task = task
        self.counting = False
        self.steps = 0

    def before_task_step(self, task: Any) -> None:
        if self.counting and task is self.task:
            self.steps += 1


async def test_a_small_yamux_write_costs_one_schedule_point(nursery: trio.Nursery) -> None:
    libp2p_tuning.apply()  # a real host pair: Noise + yamux over TCP
    writer, reader = make_net(), make_net()
    await nursery.start(writer.run)
    await nursery.start(reader.run)
    received = bytearray()
    done = trio.Event()

    async def handler(stream: Any) -> None:
        while len(received) < 10 * 728:
            received.extend(await stream.read())
        done.set()

    reader.host.set_stream_handler(FRAMES_PROTOCOL, handler)
    address = Multiaddr(reader.listen_addrs()[0])
    await writer.host.connect(info_from_p2p_addr(address))
    stream = await writer.host.new_stream(ID.from_base58(reader.peer_id),
                                          [FRAMES_PROTOCOL])
    muxed = stream.muxed_stream  # type: ignore[attr-defined]
    assert isinstance(muxed.conn, Yamux)
    counter = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        steps = []
        for index in range(10):
            counter.steps, counter.counting = 0, True
            await muxed.write(bytes([index]) * 728)
            counter.counting = False
            steps.append(counter.steps)
    finally:
        trio.lowlevel.remove_instrument(counter)
    with trio.fail_after(20):
        await done.wait()
    assert bytes(received) == b"".join(bytes([index]) * 728 for index in range(10))
    # The library: the writer semaphore, the window lock, the connection's write lock,
    # the TCP write lock, the send and a trailing checkpoint: six passes per frame. (The least
    # of ten: a heartbeat's frame on the same connection, or a busy machine, can only add passes.)
    assert min(steps) <= 1, steps


async def test_a_prompt_lock_is_taken_at_once_when_free_and_in_turn_when_held(
    nursery: trio.Nursery,
) -> None:
    lock = _PromptLock()
    counter = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        counter.counting = True
        async with lock:
            assert lock.locked()
        counter.counting = False
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert counter.steps == 0  # trio.Lock: a schedule point on every acquire
    order: list[int] = []

    async def waiter(index: int) -> None:
        async with lock:
            order.append(index)

    await lock.acquire()
    for index in range(3):  # parked in this order
        nursery.start_soon(waiter, index)
        await trio.testing.wait_all_tasks_blocked()
    assert lock.statistics().tasks_waiting == 3 and order == []
    lock.release()
    await trio.testing.wait_all_tasks_blocked()
    assert order == [0, 1, 2]


async def test_noise_messages_cut_anywhere_are_reassembled_and_a_cut_end_is_not_clean(
    nursery: trio.Nursery,
) -> None:
    """Noise packets read without a copy when one read holds them (23.), and completed by
    the library's loop when not: the same bytes, and EOF inside a packet is an unclean
    close (IncompleteReadError with the bytes received), as in 0.8.1."""
    libp2p_tuning.apply()
    sender, receiver = await tcp_pair(nursery)
    reader = NoisePacketReadWriter(TrioTCPStream(receiver))
    bodies = [b"a" * 3, b"", b"b" * 1000, bytes(range(256)) * 40]
    wire = b"".join(len(body).to_bytes(2, "big") + body for body in bodies)
    rng = random.Random(23)

    async def send() -> None:
        position = 0
        while position < len(wire):
            step = rng.choice([1, 2, 3, 700, 5000])
            await sender.send_all(wire[position:position + step])
            position += step
            await trio.testing.wait_all_tasks_blocked()
        await sender.send_all((500).to_bytes(2, "big") + b"c" * 100)  # 100 of 500, then EOF
        await sender.aclose()

    nursery.start_soon(send)
    with trio.fail_after(20):
        got = [await reader.read_msg() for _ in bodies]
        assert got == bodies
        with pytest.raises(IncompleteReadError) as cut:
            await reader.read_msg()
    assert cut.value.received_bytes == 100 and not cut.value.is_clean_close


async def test_rpcs_are_cut_from_the_buffer_with_the_librarys_limits(nursery: trio.Nursery) -> None:
    """``read_rpc`` (26.) over a real stream: RPCs cut anywhere come out whole and in order;
    a length above the limit is refused from its prefix alone, before any body arrives."""
    libp2p_tuning.apply()
    writer, reader = make_net(), make_net()
    await nursery.start(writer.run)
    await nursery.start(reader.run)
    limit = 4096
    rng = random.Random(26)
    rpcs = [rng.randbytes(rng.choice([0, 1, 127, 128, 700, 4096])) for _ in range(60)]
    got: list[bytes] = []
    refused: list[Exception] = []
    done = trio.Event()

    async def handler(stream: Any) -> None:
        buffered = _BufferedStream(stream)
        for _ in rpcs:
            got.append(await libp2p_tuning.read_rpc(buffered, limit))
        try:
            await libp2p_tuning.read_rpc(buffered, limit)
        except MessageTooLarge as error:
            refused.append(error)
        done.set()

    reader.host.set_stream_handler(FRAMES_PROTOCOL, handler)
    await writer.host.connect(info_from_p2p_addr(Multiaddr(reader.listen_addrs()[0])))
    stream = await writer.host.new_stream(ID.from_base58(reader.peer_id), [FRAMES_PROTOCOL])
    wire = b"".join(encode_varint_prefixed(rpc) for rpc in rpcs)
    position = 0
    while position < len(wire):
        step = rng.choice([1, 2, 50, 3000, 20_000])
        await stream.write(wire[position:position + step])
        position += step
    await stream.write(encode_uvarint(limit + 1))  # a prefix only: no body will follow
    with trio.fail_after(20):
        await done.wait()
    assert got == rpcs
    assert len(refused) == 1


async def test_a_pubsub_write_costs_one_schedule_point(nursery: trio.Nursery) -> None:
    """Our outbound pubsub stream's state lock is taken without a pass when free (25.):
    a write is one schedule point (its socket send), not two."""
    writer, reader = await start_mesh(nursery, 2)
    peer = next(p for p in writer.pubsub.peers if str(p) == reader.peer_id)
    stream = writer.pubsub.peers[peer]
    empty_rpc = encode_varint_prefixed(b"")
    counter = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        steps = []
        for _ in range(20):
            counter.steps, counter.counting = 0, True
            await stream.write(empty_rpc)
            counter.counting = False
            steps.append(counter.steps)
    finally:
        trio.lowlevel.remove_instrument(counter)
    # The library: a pass for NetStream's state lock, then the send: never fewer than two.
    # (The least of twenty: the peer's sending task holding a lock, or a busy machine, can
    # only add passes; in CI the median was 2 under load.)
    assert min(steps) <= 1, steps
