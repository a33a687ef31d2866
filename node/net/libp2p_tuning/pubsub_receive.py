"""py-libp2p 0.8.1 pubsub patches, receiving: what a peer sends, read, checked and contained at less CPU.

Numbered as in the package's index (``node.net.libp2p_tuning``); ``patch()`` applies them.

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

9. Unique messages are handled in the read loop. The library spawned a service
   task per message that passed the read loop's filter (``run_task``: task
   bookkeeping, a nursery child, trio scheduling it later) to run ``push_msg``.
   The read loop now awaits ``push_msg`` itself: every validator we register is
   synchronous, and ``push_msg`` only queues what it forwards (``send_rpc``
   pushes to each peer's outbound queue), so nothing it awaits waits on the
   network. A peer's messages are handled in the order it sent them, and a
   peer that sends costly messages slows only its own stream's reads.

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

26. Pubsub RPCs cut from the read buffer. The read loop read each RPC's varint length
   a byte at a time through the buffered stream (6.), then its body, and built a
   metrics event (with the peer id in base58) for every RPC. ``read_rpc`` decodes the
   length from the bytes held, refuses one above ``max_inbound_rpc_size`` at once
   (``MessageTooLarge``, as the library, before any body is read), and cuts the RPC
   when the buffer holds all of it; an empty buffer is refilled by one read; a partial
   RPC or a prefix of 9 bytes or more goes through the library's reader, limits and
   errors included. The metrics event is built only when the stream has a metrics
   channel (never in the node).
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import libp2p.pubsub.gossipsub as gossipsub_module
import libp2p.pubsub.pubsub as pubsub_module
import libp2p.pubsub.score as score_module
from libp2p.io.exceptions import (
    IOException,
    MessageTooLarge,
)
from libp2p.network.connection.exceptions import RawConnError
from libp2p.network.stream.exceptions import StreamEOF, StreamError
from libp2p.pubsub import utils as pubsub_utils
from libp2p.pubsub.pb import rpc_pb2
from libp2p.utils.varint import read_varint_prefixed_bytes_limited

from node.net.libp2p_tuning.frames import _READ_CHUNK_BYTES
from node.net.rules import IgnoredMessage

_RECORD_CACHE_SIZE = 4096
_SUBSCRIPTION_SLOTS = 4096
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



def patch() -> None:
    """Items 2-4, 6, 7, 9, 15-17 and 26 (``apply()`` runs it once)."""
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
    pubsub_module.Pubsub._is_subscribed_to_msg = _is_wanted  # type: ignore[method-assign]
    pubsub_module.ValidationCache = _ValidationCache  # type: ignore[misc,assignment]
    pubsub_module.SUBSCRIPTION_CHANNEL_SIZE = _SUBSCRIPTION_SLOTS  # type: ignore[misc]
    scorer = score_module.PeerScorer
    scorer.allow_publish = _open_gate(scorer.allow_publish, "publish_threshold")  # type: ignore[method-assign]
    scorer.allow_gossip = _open_gate(scorer.allow_gossip, "gossip_threshold")  # type: ignore[method-assign]
