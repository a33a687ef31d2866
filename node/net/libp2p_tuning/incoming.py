"""py-libp2p 0.8.1's yamux receive loop, replaced.

Numbered as in the package's index (``node.net.libp2p_tuning``); ``patch()`` applies them.

22. The yamux receive loop over whole messages. 0.8.1's ``Yamux.handle_incoming`` reads
   each frame in two reads of the secured connection, ``read_exactly(12)`` for its header
   and ``read_exactly(length)`` for its body, each through ``SecureSession``'s BytesIO
   buffer, the body inside a ``trio.fail_after`` scope (its deadline registered and
   removed, the ``PY_YAMUX_DATA_READ_TIMEOUT`` variable read and parsed) and the frame
   announced by four debug lines built with f-strings, and a flag-name list, whether
   DEBUG is on or not. ``_handle_incoming`` reads one whole decrypted message at a time
   (``secured_conn.read()``) into a buffer and cuts every frame it holds from it; the
   timeout scope is opened only when a body must be awaited from the network (a body
   already held cannot stall), and nothing is logged for a routine frame. Same
   semantics, branch by branch: SYN opens (ACKed) or RSTs an existing id, ACK, DATA,
   WINDOW_UPDATE with FIN / RST, PING answered and its answer timed, GO_AWAY ends the
   connection; the same guards (a DATA frame announcing more than ``MAX_WINDOW_SIZE``
   ends the connection before any body is read; a body not there within the library's
   timeout ends it; receive windows clamped and warned about as before; the 10-slot
   new-stream channel still pushes back); the same end for a failed read (the
   connection's cleanup) and the same warnings, on the library's logger, with the
   prefixes ``node.net.failures`` counts. What the peer sends is parsed exactly once,
   as before; only how many reads fetch it changes.
"""

from __future__ import annotations

import struct
from typing import Any

import libp2p.stream_muxer.yamux.yamux as yamux_module
import trio
from libp2p.io.exceptions import (
    IncompleteReadError,
)
from libp2p.network.connection.exceptions import RawConnError

_yamux_log = yamux_module.logger  # the library's logger: node.net.failures filters it by prefix
_FRAME_HEADER = struct.Struct(yamux_module.YAMUX_HEADER_FORMAT)
_HEADER_BYTES = yamux_module.HEADER_SIZE
_DATA, _WINDOW_UPDATE = yamux_module.TYPE_DATA, yamux_module.TYPE_WINDOW_UPDATE
_PING, _GO_AWAY = yamux_module.TYPE_PING, yamux_module.TYPE_GO_AWAY
_SYN, _ACK = yamux_module.FLAG_SYN, yamux_module.FLAG_ACK
_FIN, _RST = yamux_module.FLAG_FIN, yamux_module.FLAG_RST
_GO_AWAY_REASONS = {
    yamux_module.GO_AWAY_NORMAL: "normal termination",
    yamux_module.GO_AWAY_PROTOCOL_ERROR: "protocol error",
    yamux_module.GO_AWAY_INTERNAL_ERROR: "internal error",
    yamux_module.GO_AWAY_CONN_GARBAGE_COLLECTED: "connection garbage collected",
}
# What makes 0.8.1's loop give the connection up rather than sleep 10 ms and go on.
_FATAL_LOOP_ERRORS = (RawConnError, OSError, IncompleteReadError, trio.ClosedResourceError,
                      trio.BrokenResourceError)


class _Plaintext:
    """Decrypted bytes the receive loop holds and has not parsed yet (module doc, 22.)."""

    __slots__ = ("_read", "buffer", "offset")

    def __init__(self, secured_conn: Any) -> None:
        self._read = secured_conn.read
        self.buffer = bytearray()
        self.offset = 0

    async def fill(self, needed: int) -> None:
        """Read whole messages until ``needed`` bytes are held (IncompleteReadError at EOF)."""
        while len(self.buffer) - self.offset < needed:
            chunk = await self._read()
            if not chunk:
                held = len(self.buffer) - self.offset
                raise IncompleteReadError(
                    f"Connection closed during read operation: expected {needed} bytes but "
                    f"received {held} bytes", expected_bytes=needed, received_bytes=held)
            if self.offset:
                del self.buffer[:self.offset]
                self.offset = 0
            self.buffer += chunk

    def take(self, size: int) -> bytearray:
        start = self.offset
        self.offset = start + size
        return self.buffer[start:start + size]


async def _handle_incoming(self: Any) -> None:
    """``Yamux.handle_incoming``: frames parsed from whole decrypted messages (module doc, 22.)."""
    plaintext = _Plaintext(self.secured_conn)
    while not self.event_shutting_down.is_set():
        try:
            if len(plaintext.buffer) - plaintext.offset < _HEADER_BYTES:
                await plaintext.fill(_HEADER_BYTES)
            _, kind, flags, stream_id, length = _FRAME_HEADER.unpack_from(
                plaintext.buffer, plaintext.offset)
            plaintext.offset += _HEADER_BYTES
            body: bytes | bytearray = b""
            if kind == _DATA and length:
                if length > yamux_module.MAX_WINDOW_SIZE:
                    _yamux_log.warning("Yamux: peer %s announced oversized DATA frame "
                                       "length=%d on stream %d, closing connection",
                                       self.peer_id, length, stream_id)
                    await _give_up(self)
                    break
                if len(plaintext.buffer) - plaintext.offset < length:
                    with trio.fail_after(yamux_module._yamux_data_read_timeout()):
                        await plaintext.fill(length)
                body = plaintext.take(length)
        except trio.TooSlowError:
            _yamux_log.warning("Yamux: timed out reading DATA frame body for peer %s; "
                               "closing connection", self.peer_id)
            await _give_up(self)
            break
        except IncompleteReadError as error:
            if error.is_clean_close:
                _yamux_log.info("Yamux connection closed cleanly by peer %s", self.peer_id)
            else:
                _yamux_log.warning("Yamux connection closed unexpectedly for peer %s: %s",
                                   self.peer_id, error)
            await _give_up(self)
            break
        except Exception as error:  # 0.8.1: any failed read ends the connection
            _yamux_log.debug("Error reading a frame for peer %s: %r", self.peer_id, error)
            await _give_up(self)
            break
        try:
            if kind == _DATA and not flags & (_SYN | _ACK):
                await _on_data(self, stream_id, flags, body)
            elif kind == _WINDOW_UPDATE and not flags & (_SYN | _ACK):
                await _on_window_update(self, stream_id, flags, length)
            elif kind in (_DATA, _WINDOW_UPDATE) and flags & _SYN:
                await _on_new_stream(self, stream_id, kind, flags, length, body)
            elif kind in (_DATA, _WINDOW_UPDATE):  # ACK
                await _on_ack(self, stream_id, kind, length, body)
            elif kind == _PING:
                await _on_ping(self, flags, length)
            elif kind == _GO_AWAY:
                _yamux_log.debug("Received GO_AWAY for peer %s: %s", self.peer_id,
                                 _GO_AWAY_REASONS.get(length, f"unknown code {length}"))
                await _give_up(self)
                break
        except Exception as error:  # 0.8.1's handler: give up on a broken connection only
            if not isinstance(error, RawConnError):
                _yamux_log.error("Error in handle_incoming for peer %s: %s: %s",
                                 self.peer_id, type(error).__name__, error)
            elif str(error).strip():
                _yamux_log.warning("RawConnError during connection handling for peer %s: %s",
                                   self.peer_id, error)
            if self.event_shutting_down.is_set() or isinstance(error, _FATAL_LOOP_ERRORS):
                await _give_up(self)
                break
            await trio.sleep(0.01)


async def _give_up(self: Any) -> None:
    self.event_shutting_down.set()
    await self._cleanup_on_error()


def _receive(self: Any, stream: Any, stream_id: int, body: bytes | bytearray) -> None:
    """Append a frame's body to its stream's buffer (caller holds ``streams_lock``)."""
    self.stream_buffers[stream_id].extend(body)
    stream.recv_window -= len(body)
    if stream.recv_window < 0:
        _yamux_log.warning("Stream %d: peer exceeded receive window by %d bytes",
                           stream_id, -stream.recv_window)
        stream.recv_window = 0


def _end_flags(self: Any, stream: Any, stream_id: int, flags: int) -> None:
    """FIN and RST on a DATA or WINDOW_UPDATE frame (caller holds ``streams_lock``)."""
    if flags & _FIN:
        stream.recv_closed = True
        if stream.send_closed:
            stream.closed = True
        self.stream_events[stream_id].set()
    if flags & _RST:
        stream.closed = True
        stream.reset_received = True
        self.stream_events[stream_id].set()
    if stream.closed:
        self._finalize_stream_locked(stream, fully_closed=True)


async def _on_data(self: Any, stream_id: int, flags: int, body: bytes | bytearray) -> None:
    """A DATA frame on an open stream: its bytes to the stream's buffer, its reader woken."""
    async with self.streams_lock:
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        try:
            _receive(self, stream, stream_id, body)
            self.stream_events[stream_id].set()
            if flags:
                _end_flags(self, stream, stream_id, flags)
        except Exception as error:  # inconsistent stream tables: 0.8.1 ends that stream
            _yamux_log.error("Error reading data for stream %d: %r", stream_id, error)
            stream.recv_closed = True
            if stream.send_closed:
                stream.closed = True
            event = self.stream_events.get(stream_id)
            if event is not None:
                event.set()


async def _on_window_update(self: Any, stream_id: int, flags: int, increment: int) -> None:
    async with self.streams_lock:
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        async with stream.window_lock:
            stream.send_window += increment
        _end_flags(self, stream, stream_id, flags)


async def _take_payload(self: Any, stream: Any, stream_id: int, kind: int, length: int,
                        body: bytes | bytearray) -> None:
    """What a SYN or ACK frame carries besides its flags: a window increment or data
    (caller holds ``streams_lock``)."""
    if kind == _WINDOW_UPDATE and length > 0:
        async with stream.window_lock:
            stream.send_window += length
    elif kind == _DATA and length > 0:
        _receive(self, stream, stream_id, body)
        self.stream_events[stream_id].set()


async def _on_new_stream(self: Any, stream_id: int, kind: int, flags: int, length: int,
                         body: bytes | bytearray) -> None:
    """A SYN: the peer opens ``stream_id`` (ACKed), or RSTs it if it exists already."""
    reply: bytes | None = None
    accepted = None
    async with self.streams_lock:
        if stream_id in self.streams:
            reply = _FRAME_HEADER.pack(0, _WINDOW_UPDATE, _RST, stream_id, 0)
        else:
            stream = yamux_module.YamuxStream(stream_id, self, False)
            self.streams[stream_id] = stream
            self.stream_buffers[stream_id] = bytearray()
            self.stream_events[stream_id] = trio.Event()
            await _take_payload(self, stream, stream_id, kind, length, body)
            if flags & _FIN:
                stream.recv_closed = True
                if stream.send_closed:
                    stream.closed = True
                self.stream_events[stream_id].set()
                if stream.closed:
                    self._finalize_stream_locked(stream, fully_closed=True)
            if flags & _RST:  # reset on arrival: delivered, not ACKed
                stream.closed = True
                stream.reset_received = True
                self.stream_events[stream_id].set()
                self._finalize_stream_locked(stream, fully_closed=True)
            else:
                reply = _FRAME_HEADER.pack(0, _WINDOW_UPDATE, _ACK, stream_id, 0)
            accepted = stream
    if reply is not None:
        await self._write_frame(reply)
    if accepted is not None:
        await self.new_stream_send_channel.send(accepted)


async def _on_ack(self: Any, stream_id: int, kind: int, length: int,
                  body: bytes | bytearray) -> None:
    """The peer accepted a stream we opened (its FIN/RST flags are ignored, as in 0.8.1)."""
    async with self.streams_lock:
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        await _take_payload(self, stream, stream_id, kind, length, body)


async def _on_ping(self: Any, flags: int, value: int) -> None:
    if flags & _SYN:
        await self._write_frame(_FRAME_HEADER.pack(0, _PING, _ACK, 0, value))
    elif flags & _ACK:
        rtt = trio.current_time() - self._ping_sent_time
        self._rtt = rtt if self._rtt == 0.0 else (self._rtt + rtt) / 2
        self._ping_event.set()



def patch() -> None:
    """Item 22 (``apply()`` runs it once)."""
    yamux_module.Yamux.handle_incoming = _handle_incoming  # type: ignore[method-assign]
