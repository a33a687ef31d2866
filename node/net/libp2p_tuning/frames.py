"""py-libp2p 0.8.1 frame patches: yamux credit, TCP and Noise reads, frame writes, locks without a pass.

Numbered as in the package's index (``node.net.libp2p_tuning``); ``patch()`` applies them.

1. Yamux window updates. py-libp2p defaults ``PY_YAMUX_RELEASE_ON_READ=1``:
   a WINDOW_UPDATE frame goes back to the sender after *every* read, i.e. one
   extra encrypted frame per gossip message per hop. ``0`` restores go-yamux
   behaviour (update once half the 256 KiB window is consumed). That was not
   enough in 0.8.1:
   its "partial slack" branch still credits every read that leaves less than
   half a window unconsumed, i.e. every read of a gossip stream (14 % of a
   receiving node's CPU in the issue-27 profile, plus the frames' decryption at
   the other end). ``_window_update`` is go-yamux's ``sendWindowUpdate``: no
   frame until half the window (``target_recv_window // 2``) is consumed, then
   one update for all of it (with 0.8.1's auto-tuning epoch), and no lock
   taken or environment read on the reads that send nothing. The replacement
   reads no ``PY_YAMUX_*`` variable; the default is still set for code that
   reads it elsewhere in the library.

19. Buffered TCP reads. Every Noise message is read from the socket in two reads,
   its 2-byte length and then its body (``FixedSizeLenMsgReadWriter``), and each
   ``TrioTCPStream.read`` takes the stream's read lock and calls ``receive_some``:
   two trio schedule points per read (the lock's and the socket's), each a pass
   of the run loop with its own ``epoll_wait``, and a ``recv`` syscall, i.e. four
   passes and two syscalls per yamux frame however many frames the socket holds.
   ``_buffered_tcp_read`` receives up to ``_READ_CHUNK_BYTES`` at once and serves
   the following reads from what it holds without a lock, a syscall or a pass; an
   empty buffer reads through the library's own ``read`` (its lock, its errors,
   its EOF). Reads return the same bytes in the same order; nothing else reads
   the socket under a ``TrioTCPStream`` (0.8.1: the transports wrap a
   ``trio.SocketStream`` in it once, and every layer above reads through it).

20. Frame writes without a pass per lock. A yamux frame went through four trio
   locks and an explicit checkpoint: the stream's writer semaphore and window
   lock (``YamuxStream.write``), the connection's write lock plus a trailing
   ``checkpoint()`` (``Yamux._write_frame``) and ``TrioTCPStream``'s write lock;
   trio's ``Lock.acquire`` yields to the scheduler even when the lock is free, so
   each pubsub write cost five run-loop passes before its ``send``, and
   ``_write_frame`` also formatted a debug line (header unpacked, flag names)
   for every frame with DEBUG off. The replacements take a free lock with
   ``acquire_nowait`` (no pass) and wait on it as before when it is held (trio's
   locks are FIFO, frames keep their order); ``YamuxStream.write`` builds a frame
   that fits the send window at once when no other writer of the stream holds
   or waits for its locks, and takes the library's path otherwise (a window to
   wait for, a frame to split, a closed stream). The socket ``send`` still
   yields, so a writing task still lets others run once per frame.

21. The stream table's lock without a pass. ``Yamux.streams_lock`` guards the
   connection's stream table; the incoming loop takes it for every DATA frame and
   each stream read takes it again: two run-loop passes per received frame, and a
   node receives each message once from each mesh peer. It is now a ``_PromptLock``:
   the same trio lock, taken at once when free and awaited (FIFO) when held; only
   the schedule point of the uncontended case is gone. No path loops on it alone:
   the incoming loop yields when it has used what the socket held (19. serves at
   most ``_READ_CHUNK_BYTES`` between two receives), a reader when its stream's
   buffer is empty. Not ``NetStream._state_lock`` (one more pass per stream read
   and write): made prompt too, it let a relayed request race its circuit's end
   in ``test_a_request_does_not_start_on_a_circuit_about_to_end`` (3 of 4 runs).

23. Noise packets read without copies or log lines. ``NoisePacketReadWriter`` read a
   packet with ``read_exactly`` twice (each a bytearray, an extend and a ``bytes()``
   copy), and ``BaseNoiseMsgReadWriter.read_msg`` formatted two f-string debug lines
   per message. ``_noise_packet`` returns a read's bytes as they are when the read gave
   all that was asked (19. makes that the usual case) and completes a short one with
   the library's ``read_exactly`` (its EOF error, with the bytes received counted);
   ``_noise_read_msg`` decrypts with no logging. Every message is still decrypted and
   authenticated (a bad tag raises, as before).

24. Stream reads without debug lines. ``Yamux.read_stream`` formatted three to five
   f-string debug lines per read (the stream's state, the bytes returned). ``_read_stream``
   is the same sequence of checks in the same order (buffered data of a FIN'd stream
   first, then a reset, then data, EOF, closed) and the same waits, without them.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from typing import Any

import libp2p.io.trio as trio_io_module
import libp2p.io.utils as io_utils
import libp2p.security.noise.io as noise_io_module
import libp2p.stream_muxer.yamux.yamux as yamux_module
import trio
from libp2p.io.exceptions import (
    ConnectionClosedError,
    IncompleteReadError,
)
from libp2p.stream_muxer.exceptions import MuxedStreamEOF, MuxedStreamReset

_READ_CHUNK_BYTES = 64 * 1024
logger = logging.getLogger(__name__)


async def _window_update(self: Any, *, bytes_read: int = 0) -> None:
    """``YamuxStream._auto_tune_and_send_window_update``, go-yamux style (module doc, 1.)."""
    buffered = len(self.conn.stream_buffers.get(self.stream_id, b""))
    consumed = self.target_recv_window - (self.recv_window + buffered)
    if consumed <= 0 or consumed < self.target_recv_window // 2:
        return
    async with self.window_lock:
        buffered = len(self.conn.stream_buffers.get(self.stream_id, b""))
        increment = self._grow_to_delta(buffered)
        if increment > 0:
            increment += self._apply_autotune_epoch(buffered)
        self._pending_recv_release = 0
    if increment > 0:
        await self.send_window_update(increment, skip_lock=True)



def _buffered_tcp_read(original: Callable[..., Any]) -> Callable[..., Any]:
    """``TrioTCPStream.read`` serving small reads from one large receive (module doc, 19.)."""

    async def read(self: Any, n: int | None = None) -> bytes:
        if n is not None and n <= 0:
            return b""
        held: bytes = self._crystalmesh_held
        offset: int = self._crystalmesh_offset
        if offset >= len(held):
            wanted = _READ_CHUNK_BYTES if n is None or n < _READ_CHUNK_BYTES else n
            received = await original(self, wanted)
            if not received:
                return received  # EOF or a locally closed socket, as the library says
            held, offset = self._crystalmesh_held, self._crystalmesh_offset
            held = received if offset >= len(held) else held[offset:] + received
            offset = 0
        end = len(held) if n is None else min(len(held), offset + n)
        if offset == 0 and end == len(held):
            self._crystalmesh_held, self._crystalmesh_offset = b"", 0
            return held
        self._crystalmesh_held, self._crystalmesh_offset = held, end
        return held[offset:end]

    return read


async def _take(lock: trio.Lock) -> None:
    """Acquire ``lock`` without a schedule point when it is free (module doc, 20.)."""
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


async def _tcp_write(self: Any, data: bytes) -> None:
    """``TrioTCPStream.write`` taking a free write lock without a pass (module doc, 20.)."""
    await _take(self.write_lock)
    try:
        await self.stream.send_all(data)
    except trio.BrokenResourceError as error:
        logger.debug("write to a broken TCP stream (remote reset): %s", error)
        raise ConnectionClosedError(
            f"TCP connection reset by remote peer: {error}", transport="tcp"
        ) from error
    except trio.ClosedResourceError as error:
        logger.debug("write attempted on a locally closed TCP stream: %s", error)
    finally:
        self.write_lock.release()


async def _write_frame(self: Any, data: bytes) -> None:
    """``Yamux._write_frame``: writes serialised, no per-frame log line (module doc, 20.)."""
    await _take(self._write_lock)
    try:
        await self.secured_conn.write(data)
    finally:
        self._write_lock.release()


def _direct_stream_write(original: Callable[..., Any]) -> Callable[..., Any]:
    """``YamuxStream.write`` building a frame that fits at once when uncontended (20.)."""
    limit = yamux_module.MAX_MESSAGE_SIZE - yamux_module.HEADER_SIZE

    async def write(self: Any, data: bytes) -> None:
        size = len(data)
        # A free semaphore has no waiter (a release with waiters hands it over at 0).
        if (0 < size <= limit and size <= self.send_window and not self.send_closed
                and not self.closed and self.rw_lock._writer_lock.value == 1
                and not self.window_lock.locked()):
            self.send_window -= size
            header = struct.pack(yamux_module.YAMUX_HEADER_FORMAT, 0,
                                              yamux_module.TYPE_DATA, 0, self.stream_id, size)
            await self.conn._write_frame(header + data)
            return
        await original(self, data)

    return write


class _PromptLock:
    """A ``trio.Lock`` taken without a schedule point when free (module doc, 21.)."""

    def __init__(self) -> None:
        self._lock = trio.Lock()

    async def __aenter__(self) -> None:
        await _take(self._lock)

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()

    async def acquire(self) -> None:
        await _take(self._lock)

    def acquire_nowait(self) -> None:
        self._lock.acquire_nowait()

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def statistics(self) -> Any:
        return self._lock.statistics()


def _prompt_lock(original: Callable[..., None], name: str) -> Callable[..., None]:
    """``__init__`` that makes the instance's lock ``name`` a ``_PromptLock`` (module doc, 21.)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        setattr(self, name, _PromptLock())

    return __init__



async def _read_stream(self: Any, stream_id: int, n: int | None = -1) -> bytes:
    """``Yamux.read_stream`` without its per-read debug lines (module doc, 24.)."""
    if n is None:
        n = -1
    while True:
        async with self.streams_lock:
            stream = self.streams.get(stream_id)
            if stream is None:
                raise MuxedStreamEOF("Stream closed")
            if self.event_shutting_down.is_set():
                raise MuxedStreamEOF("Connection shut down")
            buffer = self.stream_buffers.get(stream_id)
            if buffer is None:
                if stream.reset_received:
                    raise MuxedStreamReset("Stream was reset")
                raise MuxedStreamEOF("Stream buffer closed")
            # Buffered bytes are served unless a reset arrived with the stream still open
            # for receiving (0.8.1's order: FIN'd data first, then the reset, then data).
            if buffer and (stream.recv_closed or not stream.reset_received):
                if n == -1 or n >= len(buffer):
                    data = bytes(buffer)
                    buffer.clear()
                else:
                    data = bytes(buffer[:n])
                    del buffer[:n]
                if stream.closed:
                    self._finalize_stream_locked(stream, fully_closed=True)
                return data
            if stream.reset_received:
                raise MuxedStreamReset("Stream was reset")
            if stream.recv_closed:
                raise MuxedStreamEOF("Stream is closed for receiving")
            if stream.closed:
                raise MuxedStreamReset("Stream is reset or closed")
        try:
            await self.stream_events[stream_id].wait()
            self.stream_events[stream_id] = trio.Event()
        except KeyError:
            raise MuxedStreamEOF("Stream was removed") from None


async def _read_exactly(reader: Any, size: int) -> bytes:
    """``read_exactly`` that returns one read's bytes as they are when they are all
    ``size`` of them (module doc, 23.); a short read is completed by the library's."""
    data = await reader.read(size)
    if len(data) == size:
        return data if type(data) is bytes else bytes(data)
    try:
        rest = await io_utils.read_exactly(reader, size - len(data))
    except IncompleteReadError as error:
        received = len(data) + error.received_bytes
        raise IncompleteReadError(
            f"Connection closed during read operation: expected {size} bytes but received "
            f"{received} bytes", expected_bytes=size, received_bytes=received) from error
    return bytes(data) + rest


async def _noise_packet(self: Any) -> bytes:
    """``NoisePacketReadWriter.read_msg``: the 2-byte length, then the body (module doc, 23.)."""
    reader = self.read_write_closer
    length = int.from_bytes(await _read_exactly(reader, noise_io_module.SIZE_NOISE_MESSAGE_LEN),
                            "big")
    return await _read_exactly(reader, length)


async def _noise_read_msg(self: Any, prefix_encoded: bool = False) -> bytes:
    """``BaseNoiseMsgReadWriter.read_msg`` without its three debug lines (module doc, 23.)."""
    encrypted = await self.read_writer.read_msg()
    if prefix_encoded:
        encrypted = encrypted[len(self.prefix):]
    return bytes(self.decrypt(encrypted))



def patch() -> None:
    """Items 1, 19-21, 23 and 24 (``apply()`` runs it once)."""
    os.environ.setdefault("PY_YAMUX_RELEASE_ON_READ", "0")
    yamux_module.YamuxStream._auto_tune_and_send_window_update = (  # type: ignore[method-assign]
        _window_update
    )
    tcp = trio_io_module.TrioTCPStream
    tcp._crystalmesh_held = b""  # type: ignore[attr-defined]
    tcp._crystalmesh_offset = 0  # type: ignore[attr-defined]
    tcp.read = _buffered_tcp_read(tcp.read)  # type: ignore[method-assign]
    tcp.write = _tcp_write  # type: ignore[method-assign]
    yamux_module.Yamux._write_frame = _write_frame  # type: ignore[method-assign]
    yamux_module.YamuxStream.write = _direct_stream_write(  # type: ignore[method-assign]
        yamux_module.YamuxStream.write
    )
    yamux_module.Yamux.__init__ = _prompt_lock(  # type: ignore[method-assign]
        yamux_module.Yamux.__init__, "streams_lock"
    )
    yamux_module.Yamux.read_stream = _read_stream  # type: ignore[method-assign]
    noise_io_module.NoisePacketReadWriter.read_msg = _noise_packet  # type: ignore[method-assign]
    noise_io_module.BaseNoiseMsgReadWriter.read_msg = _noise_read_msg  # type: ignore[method-assign]
