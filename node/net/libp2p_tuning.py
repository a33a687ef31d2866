"""Process-wide py-libp2p 0.8.1 tweaks: some cut per-message CPU without changing
the wire or its semantics, others contain what could kill the node.

All are applied by ``apply()`` (idempotent), called when a host is built.
The library members a patch replaces are listed in ``node.net.libp2p_compat`` (with every
other private member the node uses, and the version checked), whose test fails when one goes.

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

2. Signed peer records. Every pubsub RPC carries the sender's signed peer
   record and the receiver verifies it (protobuf parse + Ed25519 verify +
   peerstore update) on every RPC, twice for RPCs with control messages. The
   record only changes when the peer's addresses change, so a verdict for the
   exact same bytes from the same peer is cached (bounded LRU). Records that
   differ in any byte go through the library's full check.

3. Blacklist teardown race. ``Pubsub.add_to_blacklist`` tears the peer down in
   a task that awaits ``stream.reset()`` and then does ``del self.peers[peer]``;
   if the peer's dead-stream handler removed it meanwhile, the ``KeyError``
   escapes and takes the whole pubsub service (and the node) down. Seen in CI
   when banning a peer. The replacement removes the entry with ``pop``.

4. Containment of hostile frames (issue 11, row 1). ``signature_validator``
   raises (``DecodeError`` from ``deserialize_public_key``) on a crafted
   ``from``/``key`` instead of returning False; the exception escaped
   ``push_msg``, cancelled the Pubsub service and stopped the node. Three
   layers now hold: the signature check answers False on any exception;
   ``push_msg`` for a message forwarded by a peer contains every exception
   (logged, and the forwarder is charged an invalid message); a peer's read
   loop that raises ends only that peer's stream. Our own publishes still
   raise to their caller.

5. Routine failures the library logs at WARNING/ERROR (a DHT stream read
   failing, a dial to a dead address, a stream reset) are counted and lowered
   to DEBUG by ``node.net.failures.install()``.

6. Buffered pubsub reads. The pubsub read loop reads each RPC's varint length
   a byte at a time and then its body, each read going through ``NetStream``'s
   state lock, the yamux buffer and (before 1.) a window update: three or more
   reads per gossip message. ``_BufferedStream`` hands the loop bytes from a
   buffer it refills with one read of whatever yamux holds (up to 64 KiB), so
   a message costs one stream read, and several RPCs that arrived together
   cost one. Frame limits are untouched: the loop still checks the length
   prefix against ``max_inbound_rpc_size`` before reading the body.

7. Duplicates stop at the read loop. With mesh degree D a node receives each
   message from up to D - 1 mesh peers, and the library spawned a service task
   per copy (``TrioManager.run_task``: task bookkeeping, a nursery child, then
   two blacklist look-ups) before ``push_msg`` found it in the seen cache. The
   read loop's only filter before that spawn, ``_is_subscribed_to_msg``, now
   also drops a message whose id (``sha256(data)``, gossip_config) is already
   in the seen cache: a duplicate costs its frame, its decryption, its protobuf
   parse and one hash, and nothing after. Behaviour is unchanged: ``push_msg``
   returned on the same check, and only messages that passed validation are in
   the seen cache (an invalid one is still validated, and charged, each time).

8. Our signed peer record. Every outgoing pubsub RPC (each gossip message to
   each mesh peer) carries it, and ``env_to_send_in_RPC`` rebuilds the set of
   our addresses (multiaddr objects, our relay addresses) to compare it with
   the cached record's before serialising the record again. The answer is kept
   per host for ``_RECORD_TTL_S`` (1 s): an address change reaches peers at
   most a second later, well within what identify push already takes.

9. Unique messages are handled in the read loop. The library spawned a service
   task per message that passed the read loop's filter (``run_task``: task
   bookkeeping, a nursery child, trio scheduling it later) to run ``push_msg``.
   The read loop now awaits ``push_msg`` itself: every validator we register is
   synchronous, and ``push_msg`` only queues what it forwards (``send_rpc``
   pushes to each peer's outbound queue), so nothing it awaits waits on the
   network. A peer's messages are handled in the order it sent them, and a
   peer that sends costly messages slows only its own stream's reads.

10. One serialisation per forwarded message. ``GossipSub.send_rpc`` copied the
   RPC for every mesh peer, split the copy and serialised each chunk in that
   peer's sending task. An RPC that needs no split (at most ``_SHARED_MAX_BYTES``,
   within the peer queue's limit) and carries no deferred control for that peer
   is queued as is, and its varint-prefixed bytes are built once, the first time
   a sending task writes it, and reused for the other peers (a bounded cache by
   object identity). The bytes on the wire are the same: one RPC, the same fields.
   RPCs with deferred GRAFT/PRUNE to piggyback, or too large, take the library's
   path.

11. One write for what is queued together. A peer's sending task wrote each queued
   RPC on its own: one yamux frame, one Noise message, one socket send each (the
   send alone was ~10 % of a relay's CPU on loopback, kernel time included). The
   task now takes every RPC already waiting in that peer's queue (priority ones
   first, as before), up to ``_BATCH_BYTES``, and writes their varint-prefixed
   bytes in one stream write. A pubsub stream is a byte stream of length-prefixed
   RPCs, so the receiver (ours, js-libp2p, go-libp2p) reads the same RPCs; only
   how they are cut into frames changes. RPCs queue up together when the read
   loop handles a burst of messages (9.) before the sending tasks run.

12. Flood publishing (gossipsub v1.1, "Flood Publishing", on by default in go, rust
   and js). The library sends a message we publish only to our mesh of its topic.
   A peer whose subscription we have seen but that the next heartbeat has not
   grafted yet is in no mesh, and that same heartbeat grafts it before gossip is
   emitted to non-mesh peers, so it gets neither the message nor an IHAVE for it:
   a listing published just after a node joined its shard reached that node only
   at the next listings sync (the flaky shard test of issue 38). Our own messages
   now go to every gossipsub peer subscribed to the topic whose score passes the
   same gate the library applies to mesh peers (``allow_gossip``, not graylisted).
   Forwarded messages still go to the mesh only: the extra cost is one send per
   subscribed neighbour for each message this node originates.

13. Message sequence numbers survive a restart (py-libp2p 0.8.1, checked in
   ``libp2p/pubsub/pubsub.py``). ``Pubsub.__init__`` seeds ``counter`` with
   ``int(time.time())``, in seconds, and adds one per published message. A node
   that published more messages than the seconds it was down starts again below
   its last seqno, so its next messages repeat ``(from, seqno)`` pairs with new
   data. GossipSub's ``_check_equivocation`` drops them ("Equivocation detected")
   and charges the sender a behaviour penalty of 100: a restarted seller did not
   rejoin a skills mesh within 120 s (issue 38). The counter is now seeded with
   ``time.time_ns()``, as go-libp2p does (``uint64(time.Now().UnixNano())``):
   past any earlier run's counter unless that run published more than a
   billion messages a second.

14. A connection carrying a request is never trimmed (py-libp2p 0.8.1,
   ``Swarm._trim_connections`` in ``libp2p/network/swarm.py``). With one
   connection per peer (``node.net.host``), a second connection to the same
   peer makes the swarm close the older one at once unless it is younger than
   the 20 s grace period, whatever streams it carries. A DCUtR hole punch that
   succeeds on a later attempt (more than 20 s after the relayed connection
   opened) thus killed the relayed connection under a purchase in flight.
   The replacement is the library's rule plus one: a connection with an open
   stream other than pubsub's (which reopens on the connection that stays) is
   not a candidate; it stays until DCUtR closes the relayed leg after its
   60 s grace, by when new streams use the direct connection.

15. Validation cache in constant time. ``Pubsub.validate_msg`` looks every unique
   message up in a ``ValidationCache`` and puts its verdict there; 0.8.1's cache keeps
   its LRU order in a list, so each put scans it (``msg_id in access_order``) and each
   eviction shifts it (``pop(0)``): 4,096 ids compared per message at our
   ``validation_cache_size``, ~2 % of a receiving node's CPU (py-spy, 75 msg/s,
   issue 38). ``_ValidationCache`` keeps the same entries, TTL and least recently
   used eviction in an ``OrderedDict``: O(1) per get and put. The class is replaced
   in the library module, so every ``Pubsub`` built after ``apply()`` uses it.

16. Score gates that cannot refuse. Gossipsub asks ``allow_gossip`` for every mesh
   peer a message goes to and ``allow_publish`` for every peer it is sent to and for
   its forwarder (7 to 13 gate calls per message per node, 1–5 µs each: the topic
   score's four counters, the behaviour penalties). Our ``ScoreParams`` leave
   ``publish_threshold`` and ``gossip_threshold`` at 0.8.1's ``-inf`` (only the
   graylist threshold is ours, gossip_config), and no finite score is below ``-inf``:
   those gates now answer from the threshold alone (True for any topic; False for
   none, as before). A finite threshold, set by anyone later, takes the library's
   path unchanged. ``is_graylisted`` still scores every time.

17. Subscription queues as deep as our inbox. ``Pubsub`` hands each accepted message
   to the topic's subscription through a 32-slot channel (``SUBSCRIPTION_CHANNEL_SIZE``)
   and drops it when the channel is full ("fail to deliver message to subscription").
   Since 6. and 9. the read loop handles every RPC of one read (up to 64 KiB, ~80
   listings) without yielding, so a burst, or a node short of CPU whose drain task
   (node.net.gossip) runs late, lost messages for good past the 32nd: 521 such drops
   in one benchmark run at 35 msg/s on the shared machine. The channels now hold
   ``_SUBSCRIPTION_SLOTS`` (4,096, the size of Gossip's own inbox): memory is bounded
   by the same count, and a message is dropped only when both are full.

18. One round trip to open a stream (issue 36). ``BasicHost.new_stream`` selects the
   protocol with multistream-select the lock-step way: the header, wait for the
   header, the protocol, wait for the answer; with the request that makes three round
   trips for one purchase (a voucher purchase over 40 ms links took 275 ms, 13 ms of it
   work). The client sends the header and its first protocol in one write and reads both
   answers (what go-libp2p and js-libp2p clients do; py-libp2p's listener reads message
   by message, so it sees the same bytes): one round trip less. A ``na`` for the first
   protocol falls back to the library's one-at-a-time ``try_select`` for the others.
   Only the host's streams: the connection upgrade (security, muxer) is untouched.

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

25. Pubsub writes without a pass on NetStream's lock. ``NetStream.write`` takes the
   stream's ``_state_lock`` (a trio lock: a schedule point even when free) before every
   write: with the socket send, two run-loop passes per RPC written to each peer.
   Our outbound pubsub stream (written by its sending task only, and by the teardown's
   reset) gets a ``_PromptLock`` (21.) when its sending task starts: same states, same
   errors, FIFO when held; one pass per write (the send). Only that stream: a
   request's stream keeps the library's lock (see 21. for the race that made prompt).

26. Pubsub RPCs cut from the read buffer. The read loop read each RPC's varint length
   a byte at a time through the buffered stream (6.), then its body, and built a
   metrics event (with the peer id in base58) for every RPC. ``read_rpc`` decodes the
   length from the bytes held, refuses one above ``max_inbound_rpc_size`` at once
   (``MessageTooLarge``, as the library, before any body is read), and cuts the RPC
   when the buffer holds all of it; an empty buffer is refilled by one read; a partial
   RPC or a prefix of 9 bytes or more goes through the library's reader, limits and
   errors included. The metrics event is built only when the stream has a metrics
   channel (never in the node).

The items are written against py-libp2p 0.8.1 (pinned in pyproject.toml) and
``apply()`` refuses another version: most replace a library function with a copy
that assumes its internals (``_SUPPORTED_LIBP2P``).

Not here, on purpose: the Kademlia protocol id. The library's
``/ipfs/kad/1.0.0`` is a module constant, but patching it would put every DHT
of the process on one network; ``node.net.dht`` gives each DHT a view of its
host that speaks ``/crystalmesh/<network>/kad/1.0.0`` instead.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import os
import struct
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import libp2p.host.basic_host as basic_host_module
import libp2p.io.trio as trio_io_module
import libp2p.io.utils as io_utils
import libp2p.network.swarm as swarm_module
import libp2p.pubsub.gossipsub as gossipsub_module
import libp2p.pubsub.pubsub as pubsub_module
import libp2p.pubsub.score as score_module
import libp2p.security.noise.io as noise_io_module
import libp2p.stream_muxer.yamux.yamux as yamux_module
import trio
from libp2p.io.exceptions import (
    ConnectionClosedError,
    IncompleteReadError,
    IOException,
    MessageTooLarge,
)
from libp2p.network.connection.exceptions import RawConnError
from libp2p.network.stream.exceptions import StreamClosed, StreamEOF, StreamError, StreamReset
from libp2p.protocol_muxer.exceptions import (
    MultiselectClientError,
    MultiselectCommunicatorError,
    ProtocolNotSupportedError,
)
from libp2p.protocol_muxer.multiselect_client import DEFAULT_NEGOTIATE_TIMEOUT, MultiselectClient
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.pubsub import utils as pubsub_utils
from libp2p.pubsub.pb import rpc_pb2
from libp2p.stream_muxer.exceptions import MuxedStreamEOF, MuxedStreamReset
from libp2p.utils import encode_varint_prefixed
from libp2p.utils.varint import encode_delim, read_varint_prefixed_bytes_limited

from node.net import failures
from node.net.rules import IgnoredMessage

_RECORD_CACHE_SIZE = 4096
_READ_CHUNK_BYTES = 64 * 1024
_RECORD_TTL_S = 1.0
_SHARED_MAX_BYTES = 16 * 1024
_SHARED_RPCS = 256
_BATCH_BYTES = 32 * 1024
_SUBSCRIPTION_SLOTS = 4096
_SUPPORTED_LIBP2P = "0.8.1"
_applied = False
logger = logging.getLogger(__name__)


def _cached_record_check(original: Callable[[Any, Any, Any], bool]) -> Callable[..., bool]:
    verified: OrderedDict[tuple[bytes, bytes], None] = OrderedDict()

    def maybe_consume_signed_record(message: Any, host: Any, peer_id: Any) -> bool:
        if not message.HasField("senderRecord"):
            return True
        key = (peer_id.to_bytes(), message.senderRecord)
        if key in verified:
            verified.move_to_end(key)
            return True
        ok = original(message, host, peer_id)
        if ok:
            verified[key] = None
            if len(verified) > _RECORD_CACHE_SIZE:
                verified.popitem(last=False)
        return ok

    return maybe_consume_signed_record


async def _teardown_if_connected(self: Any, peer_id: Any) -> None:
    """``Pubsub._teardown_if_connected`` without the KeyError race (see module doc)."""
    stream = self.peers.get(peer_id)
    if stream is not None:
        try:
            await stream.reset()
        except Exception:
            pass
        self.peers.pop(peer_id, None)
    self._forget_all_subscriptions(peer_id)


def _safe_signature_validator(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def signature_validator(message: Any) -> bool:
        try:
            return bool(original(message))
        except Exception as exc:
            logger.debug("pubsub signature check failed on a malformed message: %r", exc)
            return False

    return signature_validator


def _charge_forwarder(pubsub: Any, forwarder: Any, message: Any) -> None:
    scorer = getattr(pubsub.router, "scorer", None)
    if scorer is None:
        return
    try:
        for topic in list(message.topicIDs):
            scorer.on_invalid_message(forwarder, topic)
    except Exception:
        logger.debug("could not charge forwarder %s", forwarder, exc_info=True)


def _contained_push_msg(original: Callable[..., Any]) -> Callable[..., Any]:
    async def push_msg(self: Any, msg_forwarder: Any, msg: Any) -> None:
        if msg_forwarder == self.host.get_id():
            await original(self, msg_forwarder, msg)
            return
        try:
            await original(self, msg_forwarder, msg)
        except IgnoredMessage:
            return  # dropped without penalty (see node.net.rules.validation)
        except Exception as exc:
            logger.warning("dropped a malformed pubsub message from %s: %r", msg_forwarder, exc)
            _charge_forwarder(self, msg_forwarder, msg)

    return push_msg


def _contained_read_loop(original: Callable[..., Any]) -> Callable[..., Any]:
    async def continuously_read_stream(self: Any, stream: Any) -> None:
        try:
            await original(self, stream)
        except Exception as exc:
            peer_id = stream.muxed_conn.peer_id
            logger.warning("closed the pubsub stream of %s after a malformed RPC: %r", peer_id, exc)
            try:
                await stream.reset()
            except Exception:
                pass
            try:
                self._handle_dead_peer(peer_id)
            except Exception:
                logger.debug("dead-peer cleanup for %s failed", peer_id, exc_info=True)

    return continuously_read_stream


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


class _BufferedStream:
    """A pubsub stream whose reads are served from one buffer (module doc, 6.).

    ``read(n)`` returns exactly ``n`` bytes unless the stream ends first (then what
    there is; the library's ``read_exactly`` turns a short read into its error).
    Everything else is the wrapped stream's.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer = bytearray()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def buffered(self) -> int:
        return len(self._buffer)

    def next_rpc(self, max_length: int) -> bytes | None:
        """The next varint-prefixed RPC when the buffer holds all of it, else None (26.).

        A length above ``max_length`` raises ``MessageTooLarge`` as the library's reader
        does, before the body is read; a prefix of 9 bytes or more is left to the library
        (its over-long and 64-bit checks).
        """
        buffer = self._buffer
        length = shift = 0
        for index in range(min(len(buffer), 9)):
            byte = buffer[index]
            length |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
        else:
            return None
        if length > max_length:
            raise MessageTooLarge(f"Message length {length} exceeds maximum allowed {max_length}")
        start = index + 1
        end = start + length
        if end > len(buffer):
            return None
        rpc = bytes(buffer[start:end])
        del buffer[:end]
        return rpc

    async def refill(self) -> None:
        """One read of the stream appended to the buffer (its errors are the stream's)."""
        self._buffer += await self._stream.read(_READ_CHUNK_BYTES)

    async def read(self, n: int | None = None) -> bytes:
        if n is None or n < 0:
            if not self._buffer:
                return bytes(await self._stream.read(_READ_CHUNK_BYTES))
            data = bytes(self._buffer)
            self._buffer.clear()
            return data
        while len(self._buffer) < n:
            chunk = await self._stream.read(max(n - len(self._buffer), _READ_CHUNK_BYTES))
            if not chunk:
                break
            self._buffer += chunk
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data


def _is_wanted(self: Any, msg: Any) -> bool:
    """``Pubsub._is_subscribed_to_msg`` that also drops duplicates (module doc, 7.)."""
    if not any(topic in self.topic_ids for topic in msg.topicIDs):
        return False
    return not self._is_msg_seen(msg)


def cached_local_record(
    original: Callable[[Any], tuple[bytes, bool]],
    ttl_s: float = _RECORD_TTL_S,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Any], tuple[bytes, bool]]:
    """``env_to_send_in_RPC`` answering from a per-host cache for ``ttl_s`` (module doc, 8.)."""
    issued: weakref.WeakKeyDictionary[Any, tuple[float, bytes]] = weakref.WeakKeyDictionary()

    def env_to_send_in_RPC(host: Any) -> tuple[bytes, bool]:
        now = clock()
        cached = issued.get(host)
        if cached is not None and now - cached[0] < ttl_s:
            return cached[1], False
        record, created = original(host)
        issued[host] = (now, record)
        return record, created

    return env_to_send_in_RPC


def _buffered_read_loop(original: Callable[..., Any]) -> Callable[..., Any]:
    async def continuously_read_stream(self: Any, stream: Any) -> None:
        await original(self, _BufferedStream(stream))

    return continuously_read_stream


async def read_rpc(stream: Any, max_length: int) -> bytes:
    """The next varint-prefixed RPC of a pubsub stream (module doc, 26.): cut from what a
    ``_BufferedStream`` holds, refilled by one read when it is empty; a partial RPC or an
    unusual prefix goes through the library's reader (same limits, same errors)."""
    if isinstance(stream, _BufferedStream):
        rpc = stream.next_rpc(max_length)
        if rpc is None and not stream.buffered():
            await stream.refill()
            rpc = stream.next_rpc(max_length)
        if rpc is not None:
            return rpc
    return await read_varint_prefixed_bytes_limited(stream, max_length)


async def _read_loop(self: Any, stream: Any) -> None:
    """``Pubsub.continuously_read_stream`` awaiting ``push_msg`` inline (module doc, 9.).

    The library's loop, less the task spawned per message; its exits are the same.
    """
    peer_id = stream.muxed_conn.peer_id
    try:
        while self.manager.is_running:
            incoming = await read_rpc(stream, self.max_inbound_rpc_size)
            rpc = rpc_pb2.RPC()
            rpc.ParseFromString(incoming)
            if not pubsub_module.maybe_consume_signed_record(rpc, self.host, peer_id):  # type: ignore[attr-defined]
                logger.debug("ignored an RPC with an invalid signed record from %s", peer_id)
                continue
            if rpc.publish:
                for message in rpc.publish:
                    if self._is_subscribed_to_msg(message) and self.manager.is_running:
                        await self.push_msg(peer_id, message)
            if rpc.subscriptions:
                if len(rpc.subscriptions) > self.max_subscriptions_per_rpc:
                    logger.warning("peer %s sent %d subscriptions in one RPC, limit %d: ignored",
                                   peer_id, len(rpc.subscriptions), self.max_subscriptions_per_rpc)
                else:
                    for subscription in rpc.subscriptions:
                        self.handle_subscription(peer_id, subscription)
            if rpc.HasField("control"):
                await self.router.handle_rpc(rpc, peer_id)
            if stream.metric_send_channel is not None:  # the metrics event, only when asked for
                event = pubsub_module.GossipsubEvent()
                event.peer_id = peer_id.pretty()
                event.message_size = len(incoming)
                event.publish, event.subopts = bool(rpc.publish), bool(rpc.subscriptions)
                event.control = rpc.HasField("control")
                await stream.metric_send_channel.send(event)
    except MessageTooLarge as error:
        logger.warning("inbound pubsub RPC from %s exceeded the size limit: %s", peer_id, error)
        try:
            await stream.reset()
        except Exception:
            pass
        self._handle_dead_peer(peer_id)
    except (StreamEOF, StreamError, IOException, RawConnError) as error:
        logger.debug("pubsub stream of %s ended: %r", peer_id, error)


class _SharedFrames:
    """Varint-prefixed bytes of RPCs queued as is for several peers (module doc, 10.).

    Keyed by object identity; an entry holds its RPC so the id cannot be reused while
    the entry lives. Bounded: an evicted RPC is serialised again if still queued.
    """

    def __init__(self, size: int = _SHARED_RPCS) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[Any, bytes | None]] = OrderedDict()
        self.built = 0

    def share(self, rpc: Any) -> None:
        if id(rpc) not in self._entries:
            self._entries[id(rpc)] = (rpc, None)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def frame(self, rpc: Any) -> bytes:
        entry = self._entries.get(id(rpc))
        if entry is None or entry[0] is not rpc:
            return encode_varint_prefixed(rpc.SerializeToString())
        if entry[1] is None:
            self.built += 1
            framed = encode_varint_prefixed(rpc.SerializeToString())
            self._entries[id(rpc)] = (rpc, framed)
            return framed
        return entry[1]


shared_frames = _SharedFrames()


def _shared_send_rpc(original: Callable[..., None]) -> Callable[..., None]:
    def send_rpc(self: Any, peer_id: Any, rpc: Any, priority: bool = False) -> None:
        queue = None if self.pubsub is None else self.pubsub.peer_queues.get(peer_id)
        if queue is None or peer_id in self._pending_control or rpc.HasField("control"):
            original(self, peer_id, rpc, priority)
            return
        size = rpc.ByteSize()
        if size > _SHARED_MAX_BYTES or size > queue.max_message_size:
            original(self, peer_id, rpc, priority)
            return
        shared_frames.share(rpc)
        if not queue.push(rpc, priority=priority):
            self._handle_dropped_rpc(peer_id, rpc, "queue_full")

    return send_rpc


async def _write_msg(self: Any, stream: Any, rpc: Any) -> bool:
    """``Pubsub.write_msg`` writing a shared RPC's bytes built once (module doc, 10.)."""
    return await _write_bytes(self, stream, shared_frames.frame(rpc))


def _batch(first: Any, queue: Any) -> bytes:
    """``first``'s bytes and those of the RPCs waiting behind it, up to ``_BATCH_BYTES``."""
    framed = shared_frames.frame(first)
    if len(queue) == 0:
        return framed
    frames = [framed]
    size = len(framed)
    while size < _BATCH_BYTES:
        waiting = queue._queue.pop()  # the non-blocking pop under RpcQueue.pop
        if waiting is None:
            break
        framed = shared_frames.frame(waiting)
        frames.append(framed)
        size += len(framed)
    return b"".join(frames)


async def _send_loop(self: Any, peer_id: Any, stream: Any, queue: Any) -> None:
    """``Pubsub.handle_sending_messages`` writing what is queued together at once (11.)."""
    _prompt_state_lock(stream)
    try:
        while True:
            rpc = await queue.pop()
            if rpc is None:
                return
            if not await _write_bytes(self, stream, _batch(rpc, queue)):
                return
    except Exception:
        logger.debug("sending loop for %s ended with an error", peer_id, exc_info=True)
        self._handle_dead_peer(peer_id)


def _prompt_state_lock(stream: Any) -> None:
    """Our outbound pubsub stream's state lock taken without a pass when free (module doc, 25.)."""
    lock = getattr(stream, "_state_lock", None)
    if type(lock) is trio.Lock and not lock.locked() and not lock.statistics().tasks_waiting:
        stream._state_lock = _PromptLock()


async def _write_bytes(self: Any, stream: Any, data: bytes) -> bool:
    try:
        await stream.write(data)
        return True
    except (StreamClosed, StreamReset):
        peer_id = stream.muxed_conn.peer_id
        logger.debug("could not write to %s: stream closed or reset", peer_id)
        self._handle_dead_peer(peer_id)
        return False


def _flood_own_publish(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_peers_to_send(self: Any, topic_ids: Any, msg_forwarder: Any, origin: Any,
                          msg_id: bytes | None = None) -> Any:
        chosen = set(original(self, topic_ids, msg_forwarder, origin, msg_id))
        pubsub = self.pubsub
        if pubsub is None or msg_forwarder != pubsub.my_id:
            return chosen
        scorer = self.scorer
        for topic in topic_ids:
            for peer in pubsub.peer_topics.get(topic, ()):
                if peer == origin or peer not in self.peer_protocol:  # a pubsub peer of ours
                    continue
                if scorer is not None and (not scorer.allow_gossip(peer, [topic])
                                           or scorer.is_graylisted(peer, [topic])):
                    continue
                chosen.add(peer)
        return chosen

    return get_peers_to_send


def _seqno_from_nanoseconds(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.counter = time.time_ns()  # module doc, 13.

    return __init__


_LONG_LIVED_PREFIXES = ("/meshsub/", "/floodsub/")


def _carries_requests(connection: Any) -> bool:
    """Whether ``connection`` has an open stream other than pubsub's (module doc, 14.)."""
    try:
        streams = list(connection.get_streams())
    except Exception:
        return False
    for stream in streams:
        try:
            protocol = str(stream.get_protocol() or "")
        except Exception:
            protocol = ""
        if not protocol.startswith(_LONG_LIVED_PREFIXES):
            return True
    return False


def _trim_connections(self: Any, peer_id: Any) -> None:
    """``Swarm._trim_connections`` that never closes a connection carrying a request (14.)."""
    connections = self.connections.get(peer_id, [])
    keep_at_most = self.connection_config.max_connections_per_peer
    if len(connections) <= keep_at_most:
        return
    grace_s = self.connection_config.grace_period
    now = time.time()
    candidates: list[tuple[int, float, Any]] = []
    for connection in connections:
        created = getattr(connection, "_created_at", None)
        if isinstance(created, int | float) and now - created < grace_s:
            continue
        try:
            if self.tag_store.is_protected(connection.muxed_conn.peer_id):
                continue
        except Exception:
            pass
        if _carries_requests(connection):
            continue
        try:
            streams = len(connection.get_streams())
        except Exception:
            streams = 0
        candidates.append((streams, float(created or 0.0), connection))
    candidates.sort(key=lambda item: (item[0], item[1]))
    trimmed = [item[2] for item in candidates[: max(0, len(connections) - keep_at_most)]]
    for connection in trimmed:
        self.cleanup_connection_health(peer_id, connection)
        try:
            self.manager.run_task(self._close_connection_async, connection)
        except Exception:
            nursery = getattr(self, "background_nursery", None)
            if nursery is not None:
                nursery.start_soon(self._close_connection_async, connection)
    gone = {id(connection) for connection in trimmed}
    self.connections[peer_id] = [c for c in self.connections[peer_id] if id(c) not in gone]

class _ValidationCache:
    """``libp2p.pubsub.pubsub.ValidationCache`` in O(1) per operation (module doc, 15.).

    Same interface and behaviour: a verdict expires ``ttl`` seconds after it was put,
    ``get`` refreshes its recency, and a put into a full cache evicts the least
    recently used entries first.
    """

    def __init__(self, ttl: int = 300, max_size: int = 1000) -> None:
        self.ttl = ttl
        self.max_size = max_size
        self.cache: OrderedDict[bytes, Any] = OrderedDict()

    def get(self, msg_id: bytes) -> Any:
        result = self.cache.get(msg_id)
        if result is None:
            return None
        if time.time() - result.timestamp > self.ttl:
            del self.cache[msg_id]
            return None
        self.cache.move_to_end(msg_id)
        return result

    def put(self, msg_id: bytes, result: Any) -> None:
        if msg_id in self.cache:
            self.cache.move_to_end(msg_id)
        else:
            while self.cache and len(self.cache) >= self.max_size:
                self.cache.popitem(last=False)
        self.cache[msg_id] = result

    def _remove(self, msg_id: bytes) -> None:
        self.cache.pop(msg_id, None)

    def clear_expired(self) -> None:
        now = time.time()
        for msg_id in [key for key, result in self.cache.items() if now - result.timestamp > self.ttl]:
            del self.cache[msg_id]


def _open_gate(original: Callable[..., bool], threshold: str) -> Callable[..., bool]:
    """A ``PeerScorer`` gate answering without a score when its threshold is -inf (16.)."""

    def gate(self: Any, peer: Any, topics: list[str]) -> bool:
        if getattr(self.params, threshold) == -math.inf:
            return bool(topics)  # the library: no topic -> False; any score >= -inf
        return original(self, peer, topics)

    return gate


_MULTISELECT = "/multistream/1.0.0"
_NOT_SUPPORTED = "na"


class PipelinedMultiselectClient(MultiselectClient):
    """Item 18: the multistream header and the first protocol in one write."""

    async def select_one_of(self, protocols: Any, communicator: Any,
                            negotiate_timeout: int = DEFAULT_NEGOTIATE_TIMEOUT) -> Any:
        if not protocols or not isinstance(communicator, MultiselectCommunicator):
            return await super().select_one_of(protocols, communicator, negotiate_timeout)
        first = protocols[0]
        with trio.move_on_after(negotiate_timeout):
            try:
                await communicator.read_writer.write(
                    encode_delim(_MULTISELECT.encode()) + encode_delim(str(first).encode()))
            except (IOException, AssertionError, ValueError, StreamError) as error:
                raise MultiselectClientError(f"handshake write failed: {error}") from error
            try:
                header = await communicator.read()
                answer = await communicator.read()
            except MultiselectCommunicatorError as error:
                raise MultiselectClientError(f"handshake read failed: {error}") from error
            if header != _MULTISELECT:
                raise MultiselectClientError(f"multiselect protocol ID mismatch: got {header!r}")
            if answer == str(first):
                return first
            if answer != _NOT_SUPPORTED:
                raise MultiselectClientError(f"unrecognized response: {answer!r}, "
                                             f"protocol={first}")
            refused = [f"protocol not supported: {first}"]
            for protocol in protocols[1:]:
                try:
                    return await self.try_select(communicator, protocol)
                except ProtocolNotSupportedError as error:
                    refused.append(str(error))
            raise MultiselectClientError(f"protocols not supported: {'; '.join(refused)}")
        raise MultiselectClientError(f"response timed out after {negotiate_timeout}s, "
                                     f"protocols tried: {list(protocols)}")


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


# ------------------------------------------------------------- 22.-24. the receive path
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
            if kind == _WINDOW_UPDATE and length > 0:
                async with stream.window_lock:
                    stream.send_window += length
            elif kind == _DATA and length > 0:
                _receive(self, stream, stream_id, body)
                self.stream_events[stream_id].set()
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
        if kind == _WINDOW_UPDATE and length > 0:
            async with stream.window_lock:
                stream.send_window += length
        elif kind == _DATA and length > 0:
            _receive(self, stream, stream_id, body)
            self.stream_events[stream_id].set()


async def _on_ping(self: Any, flags: int, value: int) -> None:
    if flags & _SYN:
        await self._write_frame(_FRAME_HEADER.pack(0, _PING, _ACK, 0, value))
    elif flags & _ACK:
        rtt = trio.current_time() - self._ping_sent_time
        self._rtt = rtt if self._rtt == 0.0 else (self._rtt + rtt) / 2
        self._ping_event.set()


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


def check_version(installed: str | None = None) -> None:
    """Refuse a py-libp2p other than the one these items were written for (module doc)."""
    installed = installed or importlib.metadata.version("libp2p")
    if installed != _SUPPORTED_LIBP2P:
        raise RuntimeError(
            f"node.net.libp2p_tuning patches py-libp2p {_SUPPORTED_LIBP2P}, found {installed}: "
            "review every item of its docstring against the new version first"
        )


def apply() -> None:
    global _applied
    if _applied:
        return
    check_version()
    _applied = True
    failures.install()
    os.environ.setdefault("PY_YAMUX_RELEASE_ON_READ", "0")
    cached = _cached_record_check(pubsub_utils.maybe_consume_signed_record)
    pubsub_module.maybe_consume_signed_record = cached  # type: ignore[attr-defined]
    gossipsub_module.maybe_consume_signed_record = cached  # type: ignore[attr-defined]
    pubsub_module.Pubsub._teardown_if_connected = _teardown_if_connected  # type: ignore[method-assign]
    pubsub_module.signature_validator = _safe_signature_validator(  # type: ignore[attr-defined,assignment]
        pubsub_module.signature_validator  # type: ignore[attr-defined]
    )
    pubsub_module.Pubsub.push_msg = _contained_push_msg(  # type: ignore[method-assign]
        pubsub_module.Pubsub.push_msg
    )
    pubsub_module.Pubsub.continuously_read_stream = _contained_read_loop(  # type: ignore[method-assign]
        _buffered_read_loop(_read_loop)
    )
    gossipsub_module.GossipSub.send_rpc = _shared_send_rpc(  # type: ignore[method-assign]
        gossipsub_module.GossipSub.send_rpc
    )
    gossipsub_module.GossipSub._get_peers_to_send = _flood_own_publish(  # type: ignore[method-assign]
        gossipsub_module.GossipSub._get_peers_to_send
    )
    pubsub_module.Pubsub.__init__ = _seqno_from_nanoseconds(  # type: ignore[method-assign]
        pubsub_module.Pubsub.__init__
    )
    swarm_module.Swarm._trim_connections = _trim_connections  # type: ignore[method-assign]
    pubsub_module.Pubsub.write_msg = _write_msg  # type: ignore[method-assign,assignment]
    pubsub_module.Pubsub.handle_sending_messages = _send_loop  # type: ignore[method-assign]
    pubsub_module.Pubsub._is_subscribed_to_msg = _is_wanted  # type: ignore[method-assign]
    cached_record = cached_local_record(pubsub_module.env_to_send_in_RPC)
    pubsub_module.env_to_send_in_RPC = cached_record  # type: ignore[assignment]
    gossipsub_module.env_to_send_in_RPC = cached_record  # type: ignore[assignment]
    yamux_module.YamuxStream._auto_tune_and_send_window_update = (  # type: ignore[method-assign]
        _window_update
    )
    pubsub_module.ValidationCache = _ValidationCache  # type: ignore[misc,assignment]
    pubsub_module.SUBSCRIPTION_CHANNEL_SIZE = _SUBSCRIPTION_SLOTS  # type: ignore[misc]
    basic_host_module.MultiselectClient = PipelinedMultiselectClient  # type: ignore[misc]
    scorer = score_module.PeerScorer
    scorer.allow_publish = _open_gate(scorer.allow_publish, "publish_threshold")  # type: ignore[method-assign]
    scorer.allow_gossip = _open_gate(scorer.allow_gossip, "gossip_threshold")  # type: ignore[method-assign]
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
    yamux_module.Yamux.handle_incoming = _handle_incoming  # type: ignore[method-assign]
    yamux_module.Yamux.read_stream = _read_stream  # type: ignore[method-assign]
    noise_io_module.NoisePacketReadWriter.read_msg = _noise_packet  # type: ignore[method-assign]
    noise_io_module.BaseNoiseMsgReadWriter.read_msg = _noise_read_msg  # type: ignore[method-assign]
