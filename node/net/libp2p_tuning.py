"""Process-wide py-libp2p 0.8.1 tweaks: two cut per-message CPU without changing
semantics, one fixes a race that could kill the node.

All are applied by ``apply()`` (idempotent), called when a host is built.

1. Yamux window updates. py-libp2p defaults ``PY_YAMUX_RELEASE_ON_READ=1``:
   a WINDOW_UPDATE frame goes back to the sender after *every* read, i.e. one
   extra encrypted frame per gossip message per hop. ``0`` restores go-yamux
   behaviour (update once half the 256 KiB window is consumed). Only a
   default: an explicit environment value wins.

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

Not here, on purpose: the Kademlia protocol id. The library's
``/ipfs/kad/1.0.0`` is a module constant, but patching it would put every DHT
of the process on one network; ``node.net.dht`` gives each DHT a view of its
host that speaks ``/crystalmesh/<network>/kad/1.0.0`` instead.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import libp2p.pubsub.gossipsub as gossipsub_module
import libp2p.pubsub.pubsub as pubsub_module
from libp2p.pubsub import utils as pubsub_utils

from node.net import failures
from node.net.rules import IgnoredMessage

_RECORD_CACHE_SIZE = 4096
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


def apply() -> None:
    global _applied
    if _applied:
        return
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
        pubsub_module.Pubsub.continuously_read_stream
    )
