"""The purchase protocol transport: one request, one response, per stream.

Built on py-libp2p's ``RequestResponse`` helper (0.8.1), which owns framing,
size limits and timeouts, and — unlike a raw stream handler — catches every
exception so a bad request can never take the node down.

Wire format on ``/crystalmesh/<network>/purchase/1`` (for docs/protocol.md):

1. The client opens a new yamux stream on the Noise-secured connection and
   negotiates ``/crystalmesh/<network>/purchase/1`` with multistream-select 1.0
   (a node of another network does not speak it: the exchange ends there).
2. It writes one frame: ``uvarint(len(payload)) || payload`` where payload is
   a sealed envelope (canonical CBOR, ``protocol.envelope``), at most
   ``MAX_MESSAGE_BYTES`` (256 KiB). Unsigned LEB128 varint, as in go-msgio.
3. The server reads exactly one frame, answers with one frame of the same
   shape (a sealed envelope: the next purchase message or an ``ErrorReply``),
   and closes its write side. The client closes too. No request ids: the
   stream *is* the request.
4. Oversize frames, a missing response within the timeout, or a reset stream
   end the exchange with an error on the client; the server resets the stream
   on oversize/timeout without answering.

The server checks the request's envelope signature and that its sender key is
the peer at the other end of the Noise channel, so a request cannot be
replayed through another connection; ``issued_at_ms`` must be within the clock
window and (sender, seq) new, as for gossip (``stale`` / ``replayed``).

Inbound limits (issue 11, row 5): at most ``max_streams_per_peer`` open
streams per peer and ``max_concurrent_inbound`` in all, and the request frame
must arrive within ``read_timeout_s``: an idle stream holds its slot for
seconds, not for the whole handler timeout.

Busy, not gone (issue 26): a stream over either limit is answered at once with
a sealed ``Busy{retry_after_ms}`` and closed, without reading the request, so
no handler ever saw it. The client sends the same bytes again after the
retry-after (with jitter) until its own deadline: a loaded seller is slower,
never "unreachable". Before, such a stream was reset and a buyer with five
purchases in flight to one seller saw a live seller as gone. The busy answers
themselves are bounded (``max_busy_inflight``); beyond that a stream is reset.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping

import trio
from libp2p.abc import IHost, INetStream
from libp2p.custom_types import TProtocol
from libp2p.host.exceptions import StreamFailure
from libp2p.io.msgio import VarIntLengthMsgReadWriter
from libp2p.network.exceptions import SwarmException
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.request_response import (
    BytesCodec,
    MessageTooLargeError,
    ProtocolNotSupportedError,
    RequestResponseConfig,
    RequestResponseError,
    RequestTimeoutError,
)
from multiaddr import Multiaddr

from node.net import failures, libp2p_compat, progress
from node.net.host import connect, live_connections, peer_info_from_addr
from node.net.rules import ReplayGuard
from protocol.codec import MAX_MESSAGE_BYTES
from protocol.envelope import (
    MAX_CLOCK_SKEW_MS,
    REASON_REPLAYED,
    REASON_STALE,
    Envelope,
    InvalidEnvelope,
    open_envelope,
    seal,
)
from protocol.identity import Identity, peer_id_from_public_key
from protocol.messages import Busy, ErrorReply
from protocol.purchase import ERROR_BAD_REQUEST, ERROR_INTERNAL, ERROR_RATE_LIMITED
from protocol.topics import PURCHASE_EXCHANGES, PURCHASE_PROTOCOL

logger = logging.getLogger(__name__)

RequestHandler = Callable[[str, Envelope], Awaitable[bytes]]
Connect = Callable[[ID, list[Multiaddr]], Awaitable[None]]

# ErrorReply needs a request id; this one answers requests we could not even read.
NO_REQUEST_ID = "0" * 32
# A purchase handler holds its stream for a settlement (a second or so on a real chain):
# a busy client asks again after about this long, spread by jitter so a burst does not
# come back in lockstep.
BUSY_RETRY_AFTER_MS = 250
BUSY_JITTER = 0.5
# A request whose stream never opened (nothing was sent) is tried again after dialling anew,
# up to this many times, pausing 0.1, 0.2, 0.4 s: a fresh connection can be closed under us
# while both ends settle which one to keep (two dials crossing, a peer that restarts).
NOT_SENT_RETRIES = 3
NOT_SENT_PAUSE_S = 0.1


class ReqRespError(Exception):
    """A purchase-protocol exchange failed."""


class PeerUnreachable(ReqRespError):
    """No connection to the peer could be made (no address, dial failed, banned)."""


class RequestTimeout(ReqRespError):
    """The peer did not answer within the timeout."""


class RequestFailed(ReqRespError):
    """The exchange broke: stream reset, protocol unsupported, or a frame over the size limit."""


class ProtocolUnsupported(RequestFailed):
    """The peer does not speak the protocol id asked for (an older or another node)."""


class PeerBusy(RequestTimeout):
    """The peer answered busy until the timeout ran out: it is alive, only loaded."""


class _NotSent(Exception):
    """The request's stream never opened (carries the error to raise if it stays so)."""

    def __init__(self, error: ReqRespError) -> None:
        super().__init__(str(error))
        self.error = error


class PurchaseTransport:
    """Serve and send purchase-protocol requests (payloads are sealed envelopes)."""

    def __init__(
        self,
        host: IHost,
        identity: Identity,
        next_seq: Callable[[], int],
        handler_timeout_s: float = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_concurrent_inbound: int = 64,
        is_banned: Callable[[ID], bool] = lambda peer: False,
        protocol_id: str = PURCHASE_PROTOCOL,
        max_streams_per_peer: int = 4,
        read_timeout_s: float = 5.0,
        clock_window_ms: int = MAX_CLOCK_SKEW_MS,
        now_ms: Callable[[], int] | None = None,
        exchanges: Mapping[str, frozenset[str]] = PURCHASE_EXCHANGES,
        busy_retry_after_ms: int = BUSY_RETRY_AFTER_MS,
        max_busy_inflight: int | None = None,
        connect: Connect | None = None,
    ) -> None:
        self.host = host
        # How a peer we are not connected to is reached: direct, else through a relay
        # (``Reachability.connect``); a direct dial of the known addresses by default.
        self.connect = connect or self._dial_direct
        # A given ``connect`` (``Reachability.connect``) is asked even when connected: it
        # renews a relayed connection whose circuit is about to end.
        self._connect_decides = connect is not None
        self.exchanges = exchanges
        self.identity = identity
        self.next_seq = next_seq
        self.handler_timeout_s = handler_timeout_s
        self.max_message_bytes = max_message_bytes
        self.max_concurrent_inbound = max_concurrent_inbound
        self.is_banned = is_banned
        self.protocol_id = TProtocol(protocol_id)
        self.max_streams_per_peer = max_streams_per_peer
        self.read_timeout_s = read_timeout_s
        self.clock_window_ms = clock_window_ms
        self.now_ms = now_ms or _now_ms
        self.replays = ReplayGuard()
        # Marks when the request is out (``node.net.progress``): after it, the time is the peer's.
        self._rr = libp2p_compat.request_response_noting_writes(
            host, lambda: progress.step("answer"))
        self._codec = BytesCodec()
        self._handler: RequestHandler | None = None
        self._open_streams: dict[ID, int] = {}
        self.busy_retry_after_ms = busy_retry_after_ms
        self.max_busy_inflight = max_busy_inflight or max_concurrent_inbound
        self._busy_inflight = 0
        self.refused_streams = 0  # streams not served: answered busy or reset
        self.busy_replies = 0  # of which answered busy
        self.busy_retries = 0  # client side: requests sent again after a busy answer

    def _config(self, timeout_s: float) -> RequestResponseConfig:
        return RequestResponseConfig(
            timeout=timeout_s,
            max_request_size=self.max_message_bytes,
            max_response_size=self.max_message_bytes,
            max_concurrent_inbound=self.max_concurrent_inbound,
        )

    # ------------------------------------------------------------------ server
    def serve(self, handler: RequestHandler) -> None:
        """Answer requests with ``await handler(peer_id, envelope) -> sealed response bytes``.

        A handler exception is logged and answered with ``ErrorReply("internal")``.
        Handlers get ``handler_timeout_s`` (the server resets the stream after that).
        """
        self._handler = handler
        self.host.set_stream_handler(self.protocol_id, self._on_stream)

    def stop_serving(self) -> None:
        self.host.remove_stream_handler(self.protocol_id)
        self._handler = None

    def error_reply(self, code: str, detail: str = "", request_id: str = NO_REQUEST_ID) -> bytes:
        """A sealed ``ErrorReply`` from this node (``code`` from protocol.purchase.ERROR_CODES)."""
        reply = ErrorReply(request_id=request_id, code=code, message=detail[:280])
        return seal(self.identity, ErrorReply.KIND, reply, self.next_seq(), _now_ms())

    async def _on_stream(self, stream: INetStream) -> None:
        peer_id = stream.muxed_conn.peer_id
        open_now = self._open_streams.get(peer_id, 0)
        if (open_now >= self.max_streams_per_peer
                or sum(self._open_streams.values()) >= self.max_concurrent_inbound):
            self.refused_streams += 1
            await self._answer_busy(stream, peer_id, open_now)
            return
        self._open_streams[peer_id] = open_now + 1
        try:
            framing = VarIntLengthMsgReadWriter(stream, max_msg_size=self.max_message_bytes)
            with trio.fail_after(self.read_timeout_s):
                data = await framing.read_msg()
            response = await self._on_request(data, peer_id)
            with trio.fail_after(self.read_timeout_s):
                await framing.write_msg(response)
            await stream.close()
        except Exception as error:  # idle, oversize, reset: the stream goes, the node stays
            failures.count(failures.STREAM_RESET)
            logger.debug("stream dropped protocol=%s peer=%s: %r", self.protocol_id, peer_id, error)
            await _reset(stream)
        finally:
            left = self._open_streams.get(peer_id, 1) - 1
            if left > 0:
                self._open_streams[peer_id] = left
            else:
                self._open_streams.pop(peer_id, None)

    async def _answer_busy(self, stream: INetStream, peer_id: ID, open_now: int) -> None:
        """Say busy (the request stays unread) and close; reset if even that is over its bound."""
        if self._busy_inflight >= self.max_busy_inflight:
            failures.count(failures.STREAM_REFUSED)
            logger.debug("stream reset, busy answers at their bound peer=%s", peer_id)
            await _reset(stream)
            return
        self._busy_inflight += 1
        try:
            busy = Busy(retry_after_ms=self.busy_retry_after_ms)
            reply = seal(self.identity, Busy.KIND, busy, self.next_seq(), _now_ms())
            framing = VarIntLengthMsgReadWriter(stream, max_msg_size=self.max_message_bytes)
            with trio.fail_after(self.read_timeout_s):
                await framing.write_msg(reply)
            await stream.close()
            self.busy_replies += 1
            logger.debug("stream answered busy peer=%s open=%d", peer_id, open_now)
        except Exception as error:
            logger.debug("busy answer dropped peer=%s: %r", peer_id, error)
            await _reset(stream)
        finally:
            self._busy_inflight -= 1

    async def _on_request(self, data: bytes, peer_id: ID) -> bytes:
        peer = str(peer_id)
        if self.is_banned(peer_id):
            return self.error_reply(ERROR_RATE_LIMITED, "banned")
        try:
            envelope = open_envelope(data, self.max_message_bytes)
        except InvalidEnvelope as error:
            return self.error_reply(ERROR_BAD_REQUEST, error.reason)
        request_id = _request_id_of(envelope)
        if abs(envelope.issued_at_ms - self.now_ms()) > self.clock_window_ms:
            return self.error_reply(ERROR_BAD_REQUEST, REASON_STALE, request_id)
        if not self.replays.is_new(envelope.sender, envelope.seq):
            return self.error_reply(ERROR_BAD_REQUEST, REASON_REPLAYED, request_id)
        if envelope.kind not in self.exchanges:
            return self.error_reply(
                ERROR_BAD_REQUEST, f"{envelope.kind!r} is not a request of {self.protocol_id}",
                request_id,
            )
        if peer_id_from_public_key(envelope.sender) != peer:
            return self.error_reply(ERROR_BAD_REQUEST, "sender_mismatch", request_id)
        handler = self._handler
        if handler is None:
            return self.error_reply(ERROR_INTERNAL, "not serving purchases", request_id)
        self.replays.commit(envelope.sender, envelope.seq)
        try:
            with trio.fail_after(self.handler_timeout_s):
                response = await handler(peer, envelope)
        except trio.TooSlowError:
            logger.warning("purchase handler timed out peer=%s kind=%s", peer, envelope.kind)
            return self.error_reply(ERROR_INTERNAL, "timeout", request_id)
        except Exception:
            logger.exception("purchase handler failed peer=%s kind=%s", peer, envelope.kind)
            return self.error_reply(ERROR_INTERNAL, "", request_id)
        if not isinstance(response, bytes | bytearray) or len(response) > self.max_message_bytes:
            logger.error("purchase handler returned an invalid response peer=%s", peer)
            return self.error_reply(ERROR_INTERNAL, "", request_id)
        return bytes(response)

    # ------------------------------------------------------------------ client
    async def request(self, peer: str, data: bytes, timeout_s: float = 30.0) -> bytes:
        """Send ``data`` (a sealed envelope) to ``peer`` and return the raw response bytes.

        ``peer`` is a peer id (must be connected or have known addresses) or
        a full ``/ip4/…/tcp/…/p2p/<id>`` multiaddr (dialled if needed).
        ``timeout_s`` covers dialling, the request and the response, and every
        retry after a ``Busy`` answer (raises ``PeerBusy`` if the peer stays busy).
        """
        raw, _ = await self._exchange(peer, data, timeout_s)
        return raw

    async def _exchange(self, peer: str, data: bytes, timeout_s: float) -> tuple[bytes, Envelope | None]:
        """The response bytes and, if they opened as a valid envelope, the envelope."""
        if len(data) > self.max_message_bytes:
            raise RequestFailed(f"request of {len(data)} bytes exceeds {self.max_message_bytes}")
        deadline = trio.current_time() + timeout_s
        peer_id = await self._reach(peer, timeout_s)
        was_busy = False
        redials = 0
        while True:
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                if was_busy:
                    raise PeerBusy(f"{peer_id} stayed busy for {timeout_s} s")
                raise RequestTimeout(f"no time left after dialling {peer_id}")
            progress.step("stream", self._connection_kind(peer_id))
            try:
                raw = await self._send(peer_id, data, remaining, timeout_s)
            except _NotSent as not_sent:
                # The stream never opened, so nothing was sent: the connection died under
                # us (two peers dialling each other at once keep one connection each, and
                # each closes the other's). Reach the peer again, a few times, after a pause.
                pause = NOT_SENT_PAUSE_S * 2 ** redials
                if redials >= NOT_SENT_RETRIES or trio.current_time() + pause >= deadline:
                    raise not_sent.error from not_sent.error.__cause__
                redials += 1
                logger.info("stream to %s did not open, redialling (%d of %d)", peer_id, redials,
                            NOT_SENT_RETRIES)
                await trio.sleep(pause)
                peer_id = await self._reach(peer, max(deadline - trio.current_time(), 0.01))
                continue
            except RequestTimeout as error:
                if was_busy:  # it answered busy and then ran out our clock: alive, only loaded
                    raise PeerBusy(f"{peer_id} stayed busy for {timeout_s} s") from error
                raise
            try:
                envelope: Envelope | None = open_envelope(raw, self.max_message_bytes)
            except InvalidEnvelope:
                envelope = None
            if envelope is None or envelope.kind != Busy.KIND or (
                    peer_id_from_public_key(envelope.sender) != str(peer_id)):
                return raw, envelope
            busy = envelope.message()
            assert isinstance(busy, Busy)
            # Busy was said before the request was read: the same bytes are not a replay.
            wait_s = busy.retry_after_ms / 1000 * (1 + random.uniform(0, BUSY_JITTER))
            if trio.current_time() + wait_s >= deadline:
                raise PeerBusy(f"{peer_id} stayed busy for {timeout_s} s")
            self.busy_retries += 1
            was_busy = True
            await trio.sleep(wait_s)

    async def _send(self, peer_id: ID, data: bytes, remaining: float, timeout_s: float) -> bytes:
        try:
            return await self._rr.send_request(
                peer_id, [self.protocol_id], data, self._codec, self._config(remaining)
            )
        except RequestTimeoutError as error:
            raise RequestTimeout(f"{peer_id} did not answer within {timeout_s} s") from error
        except ProtocolNotSupportedError as error:
            raise ProtocolUnsupported(f"{peer_id} does not speak {self.protocol_id}") from error
        except MessageTooLargeError as error:
            raise RequestFailed(f"frame over {self.max_message_bytes} bytes: {error}") from error
        except RequestResponseError as error:
            mapped: ReqRespError
            if not live_connections(self.host, peer_id):
                mapped = PeerUnreachable(f"{peer_id}: {error}")
            else:
                mapped = RequestFailed(f"{peer_id}: {error}")
            mapped.__cause__ = error
            # The stream never opened: no connection was usable, or it closed under us.
            if isinstance(error.__cause__, (StreamFailure, SwarmException)):
                raise _NotSent(mapped) from error
            raise mapped from error

    async def request_envelope(self, peer: str, data: bytes, timeout_s: float = 30.0) -> Envelope:
        """``request`` and open the response; checks it is signed by the peer we asked."""
        peer_id = _peer_id_of(peer)
        raw, envelope = await self._exchange(peer, data, timeout_s)
        if envelope is None:
            try:
                envelope = open_envelope(raw, self.max_message_bytes)
            except InvalidEnvelope as error:
                raise RequestFailed(f"invalid response from {peer_id}: {error}") from error
        if peer_id_from_public_key(envelope.sender) != str(peer_id):
            raise RequestFailed(f"response from {peer_id} is signed by another key")
        return envelope

    async def _reach(self, peer: str, timeout_s: float) -> ID:
        peer_id = _peer_id_of(peer)
        if self.is_banned(peer_id):
            raise PeerUnreachable(f"{peer_id} is banned")
        if live_connections(self.host, peer_id) and not self._connect_decides:
            return peer_id
        try:
            addrs = list(peer_info_from_addr(peer).addrs) if peer.startswith("/") else []
            with trio.fail_after(timeout_s):
                await self.connect(peer_id, addrs)
        except trio.TooSlowError as error:
            raise PeerUnreachable(f"dialling {peer_id} took over {timeout_s} s") from error
        except Exception as error:
            raise PeerUnreachable(f"cannot connect to {peer_id}: {error}") from error
        return peer_id


    def _connection_kind(self, peer_id: ID) -> str:
        connections = live_connections(self.host, peer_id)
        relayed = sum(1 for conn in connections if _relayed(conn))
        return f"connections={len(connections)} relayed={relayed}"

    async def _dial_direct(self, peer_id: ID, addrs: list[Multiaddr]) -> None:
        known = addrs or list(self.host.get_peerstore().addrs(peer_id))
        if not known:
            raise PeerUnreachable(f"no known address for {peer_id}")
        await connect(self.host, PeerInfo(peer_id, known))


def _relayed(connection: object) -> bool:
    try:
        addrs = connection.get_transport_addresses()  # type: ignore[attr-defined]
    except Exception:
        return False
    return any("/p2p-circuit" in str(addr) for addr in addrs or ())


async def _reset(stream: INetStream) -> None:
    try:
        await stream.reset()
    except Exception:
        logger.debug("stream reset failed", exc_info=True)


def _request_id_of(envelope: Envelope) -> str:
    request_id = envelope.body.get("request_id")
    return request_id if isinstance(request_id, str) else NO_REQUEST_ID


def _peer_id_of(peer: str) -> ID:
    try:
        if peer.startswith("/"):
            return peer_info_from_addr(peer).peer_id
        return ID.from_base58(peer)
    except Exception as error:
        raise PeerUnreachable(f"not a peer id or /p2p multiaddr: {peer!r}") from error


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
