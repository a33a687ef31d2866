"""py-libp2p 0.8.1 pubsub patches, sending: what this node publishes and forwards, at less CPU.

Numbered as in the package's index (``node.net.libp2p_tuning``); ``patch()`` applies them.

8. Our signed peer record. Every outgoing pubsub RPC (each gossip message to
   each mesh peer) carries it, and ``env_to_send_in_RPC`` rebuilds the set of
   our addresses (multiaddr objects, our relay addresses) to compare it with
   the cached record's before serialising the record again. The answer is kept
   per host for ``_RECORD_TTL_S`` (1 s): an address change reaches peers at
   most a second later, well within what identify push already takes.

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

25. Pubsub writes without a pass on NetStream's lock. ``NetStream.write`` takes the
   stream's ``_state_lock`` (a trio lock: a schedule point even when free) before every
   write: with the socket send, two run-loop passes per RPC written to each peer.
   Our outbound pubsub stream (written by its sending task only, and by the teardown's
   reset) gets a ``_PromptLock`` (21.) when its sending task starts: same states, same
   errors, FIFO when held; one pass per write (the send). Only that stream: a
   request's stream keeps the library's lock (see 21. for the race that made prompt).

27. A peer whose stream from us died keeps its subscriptions. When a write on our
   pubsub stream to a peer fails (the stream was reset, or a duplicate connection
   closed under it) while the peer stays connected, the library opens a new stream
   but first forgets every subscription of that peer. Subscriptions come only on the
   peer's own stream to us, which still runs and never repeats them: the peer was
   never again sent a message of its topics, nor an IHAVE, until a new connection
   (seen in the suite: a management warning never reached a seller that stayed
   connected). Their subscriptions are now kept while the peer is connected (the
   peer's next SUBSCRIBE/UNSUBSCRIBE still updates them). What the dead stream could
   not send then comes too: once the new stream is up, the library replays its recent
   messages of the topics it knows the peer follows (``_replay_recent_messages``),
   which it could not do with the subscriptions gone. At most once per
   ``_REPLAY_INTERVAL_S`` per peer: a peer that kills our stream again and again (it
   resets it on arrival) keeps its subscriptions but is not sent the message cache
   each time, so it cannot make us repeat it in a loop.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import libp2p.pubsub.gossipsub as gossipsub_module
import libp2p.pubsub.pubsub as pubsub_module
import trio
from libp2p.network.stream.exceptions import StreamClosed, StreamReset
from libp2p.utils import encode_varint_prefixed

from node.net.libp2p_tuning.frames import _PromptLock

_RECORD_TTL_S = 1.0
_SHARED_MAX_BYTES = 16 * 1024
_SHARED_RPCS = 256
_BATCH_BYTES = 32 * 1024
_REPLAY_INTERVAL_S = 10.0
_REPLAYED_PEERS_MAX = 4096
logger = logging.getLogger(__name__)


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
        _outbound_lost(self, peer_id)


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
        _outbound_lost(self, peer_id)
        return False


def _outbound_lost(pubsub: Any, peer_id: Any) -> None:
    """Our stream to ``peer_id`` died: the library's teardown, keeping the peer's
    subscriptions while it stays connected, and its replay once per interval (27.)."""
    connected = pubsub._peer_is_connected(peer_id)  # no await below: it stays true or false
    topics = [topic for topic, peers in pubsub.peer_topics.items() if peer_id in peers] if connected else []
    count = pubsub._peer_subscription_count.get(peer_id)
    pubsub._handle_dead_peer(peer_id)
    if not topics:
        return
    for topic in topics:
        pubsub.peer_topics.setdefault(topic, set()).add(peer_id)
    if count is not None:
        pubsub._peer_subscription_count[peer_id] = count
    replayed_at = _replayed_at(pubsub)
    now = trio.current_time()
    if now - replayed_at.get(peer_id, -_REPLAY_INTERVAL_S) < _REPLAY_INTERVAL_S:
        pubsub._replayed_recent_topics[peer_id] = set(topics)  # the gate, spent: no replay
        return
    replayed_at[peer_id] = now


def _replayed_at(pubsub: Any) -> dict[Any, float]:
    """When each peer whose stream from us died was last let replay (27.), bounded."""
    table: dict[Any, float] | None = getattr(pubsub, "_crystalmesh_replayed_at", None)
    if table is None:
        table = pubsub._crystalmesh_replayed_at = {}
    if len(table) >= _REPLAYED_PEERS_MAX:
        cutoff = trio.current_time() - _REPLAY_INTERVAL_S
        for peer in [peer for peer, at in table.items() if at < cutoff]:
            del table[peer]
        if len(table) >= _REPLAYED_PEERS_MAX:
            table.clear()
    return table


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



def patch() -> None:
    """Items 8, 10-13, 25 and 27 (``apply()`` runs it once)."""
    gossipsub_module.GossipSub.send_rpc = _shared_send_rpc(  # type: ignore[method-assign]
        gossipsub_module.GossipSub.send_rpc
    )
    gossipsub_module.GossipSub._get_peers_to_send = _flood_own_publish(  # type: ignore[method-assign]
        gossipsub_module.GossipSub._get_peers_to_send
    )
    pubsub_module.Pubsub.__init__ = _seqno_from_nanoseconds(  # type: ignore[method-assign]
        pubsub_module.Pubsub.__init__
    )
    pubsub_module.Pubsub.write_msg = _write_msg  # type: ignore[method-assign,assignment]
    pubsub_module.Pubsub.handle_sending_messages = _send_loop  # type: ignore[method-assign]
    cached_record = cached_local_record(pubsub_module.env_to_send_in_RPC)
    pubsub_module.env_to_send_in_RPC = cached_record  # type: ignore[assignment]
    gossipsub_module.env_to_send_in_RPC = cached_record  # type: ignore[assignment]
