"""Frames in and out of a real TCP connection with fewer syscalls and trio passes
(node.net.libp2p_tuning, 19. and 20.): Noise messages that arrived together cost one
receive, not two per message, and a yamux frame written on a quiet stream costs one
schedule point (its socket send), not one per lock it goes through. Same bytes, same order.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import trio
import trio.lowlevel
import trio.testing
from libp2p.custom_types import TProtocol
from libp2p.io.trio import TrioTCPStream
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.security.noise.io import NoisePacketReadWriter
from libp2p.stream_muxer.yamux.yamux import Yamux
from multiaddr import Multiaddr

from node.net import libp2p_tuning
from tests.support.net import make_net

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
    # the TCP write lock, the send and a trailing checkpoint: six passes per frame. (The median:
    # a heartbeat's frame on the same connection may hold its write lock once in a while.)
    assert sorted(steps)[len(steps) // 2] <= 1, steps


async def test_a_prompt_lock_is_taken_at_once_when_free_and_in_turn_when_held(
    nursery: trio.Nursery,
) -> None:
    lock = libp2p_tuning._PromptLock()
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
