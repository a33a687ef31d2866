"""Gossip: publish signed envelopes, validate what arrives, hand it to handlers.

Flow of an inbound message (py-libp2p 0.8.1 ``Pubsub.push_msg``):

    seen-cache → pubsub signature → our topic validator (``_validate``)
    → mark seen → subscription queue (32 slots, drops when full)
    → ``_drain`` (moves it at once to our own larger channel)
    → ``_dispatch`` (calls the handler registered for the topic)

The validator is synchronous and must return a bool; it stores the opened
envelope so the drain loop does not decode or verify twice. Validators also
run on our own publishes: ``publish`` reports such a rejection to its caller
as ``InvalidEnvelope`` and it is not counted against any peer.

More wire topics can carry one topic's messages (``carry``: listing shards carry the
skills topic's): the same validation path, plus an extra rule of the carrying topic,
and the same handlers once ``follow`` subscribed to it.

Callers name topics by the default network's ids (``protocol.topics.SKILLS``
...); on the wire each is the same topic on this node's network
(``wire_topic``), so a node of another network never shares a topic with us.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio
from libp2p.abc import ISubscriptionAPI
from libp2p.peer.id import ID
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub

from node.net.rules import (
    IGNORE_REASONS,
    RATE_LIMITED,
    IgnoredMessage,
    MessageValidator,
    Rejection,
    RejectionCounter,
)
from protocol.envelope import Envelope, InvalidEnvelope, open_envelope, seal
from protocol.identity import Identity, peer_id_from_public_key
from protocol.topics import (
    BOUNTIES,
    DEFAULT_NETWORK,
    SKILLS,
    TOPIC_KINDS,
    TRUST,
    WEATHER,
    on_network,
)

logger = logging.getLogger(__name__)

TOPICS: tuple[str, ...] = (SKILLS, WEATHER, TRUST, BOUNTIES)

EnvelopeHandler = Callable[[Envelope], Awaitable[None]]
RejectionSink = Callable[[Rejection], None]
# A carrying topic's own rule over an envelope that passed the carried topic's validation:
# the rejection (its reason is charged to the forwarder), or None to accept.
ExtraRule = Callable[[Envelope], InvalidEnvelope | None]


class SequenceSource:
    """Strictly increasing envelope sequence numbers that survive restarts without a file.

    ``next()`` returns ``max(previous + 1, unix_ms * 1000)``: a restarted node
    starts above everything it sent before as long as its clock did not go
    back and it sent fewer than 1000 messages per millisecond.
    """

    def __init__(self, now_ms: Callable[[], int] | None = None, start: int = 0) -> None:
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)
        self._last = start

    def next(self) -> int:
        self._last = max(self._last + 1, self._now_ms() * 1000)
        return self._last

    @property
    def last(self) -> int:
        return self._last


class Gossip:
    """Topic subscriptions, validators, publish and receive loops over one Pubsub."""

    def __init__(
        self,
        identity: Identity,
        pubsub: Pubsub,
        validator: MessageValidator,
        rejections: RejectionCounter,
        sequence: SequenceSource | None = None,
        topics: Iterable[str] = TOPICS,
        deliver_own: bool = False,
        inbox_size: int = 4096,
        on_rejected: RejectionSink | None = None,
        network: str = DEFAULT_NETWORK,
    ) -> None:
        self.identity = identity
        self.network = network
        self.pubsub = pubsub
        self.validator = validator
        self.rejections = rejections
        self.sequence = sequence or SequenceSource(validator.now_ms)
        self.topics = tuple(topics)
        self._wire = {topic: on_network(topic, network) for topic in self.topics}
        self.deliver_own = deliver_own
        self._on_rejected = on_rejected
        self._handlers: dict[str, list[EnvelopeHandler]] = {}
        # data bytes -> envelope accepted by the validator, waiting for the drain loop.
        self._accepted: OrderedDict[bytes, Envelope] = OrderedDict()
        self._accepted_max = 4096
        self._own_rejection: InvalidEnvelope | None = None
        # data bytes -> envelope of our own publishes in flight (publish_sealed returns it).
        self._own_accepted: dict[bytes, Envelope] = {}
        self._inbox_send, self._inbox_receive = trio.open_memory_channel[tuple[str, Envelope]](
            inbox_size
        )
        self.dropped = 0
        self.delivered = 0
        self.ignored: dict[str, int] = {}
        self._subscribed = trio.Event()
        for topic in self.topics:
            pubsub.set_topic_validator(self._wire[topic], self._validator_for(topic), False)

    def wire_topic(self, topic: str) -> str:
        """The pubsub topic that carries ``topic`` on this node's network."""
        wire = self._wire.get(topic)
        if wire is None:
            try:
                wire = on_network(topic, self.network)
            except ValueError:
                wire = topic  # not a crystalmesh topic: no validator of ours runs on it
        return wire

    def carry(self, topic: str, as_topic: str, rule: ExtraRule | None = None) -> None:
        """Validate messages on wire topic ``topic`` exactly as ``as_topic``'s, then by ``rule``.

        Accepted ones reach ``as_topic``'s handlers once ``follow(topic, as_topic)`` runs; a
        rejection by ``rule`` is recorded against ``topic``, as any other against its topic.
        """
        if as_topic not in self.topics:
            raise ValueError(f"not subscribed to {as_topic!r}")
        self.pubsub.set_topic_validator(self.wire_topic(topic),
                                        self._validator_for(as_topic, topic, rule), False)

    async def follow(self, topic: str, as_topic: str,
                     task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe to carried topic ``topic`` (see ``carry``) and hand what it brings to
        ``as_topic``'s handlers until cancelled; started once subscribed."""
        subscription = await self.pubsub.subscribe(self.wire_topic(topic))
        task_status.started()
        await self._drain(as_topic, subscription)

    # ----------------------------------------------------------------- handlers
    def on(self, topic: str, handler: EnvelopeHandler) -> None:
        """Call ``await handler(envelope)`` for every accepted envelope on ``topic``."""
        if topic not in self.topics:
            raise ValueError(f"not subscribed to {topic!r}")
        self._handlers.setdefault(topic, []).append(handler)

    # ------------------------------------------------------------------ publish
    async def publish(self, topic: str, message: Any, issued_at_ms: int | None = None) -> Envelope:
        """Seal ``message`` (a protocol.messages object) with our key and gossip it.

        Raises ``ValueError`` if the message kind does not belong on ``topic``
        and ``InvalidEnvelope`` if our own validator rejects it (e.g. weather
        from a node that is not a management node).
        """
        kind = message.KIND
        if kind not in TOPIC_KINDS.get(topic, ()):
            raise ValueError(f"kind {kind!r} is not allowed on {topic!r}")
        await self._subscribed.wait()
        if issued_at_ms is None:
            # Messages that carry their own issue time (weather) must match the envelope's.
            issued_at_ms = getattr(message, "issued_at_ms", None) or self.validator.now_ms()
        issued = issued_at_ms
        data = seal(self.identity, kind, message, self.sequence.next(), issued)
        return await self.publish_sealed(topic, data)

    async def publish_sealed(self, topic: str, data: bytes) -> Envelope:
        """Gossip already sealed envelope bytes (tests, relays); validated like any message.

        The envelope returned is the one our validator opened on the way out (its
        signature checked once, not again here)."""
        await self._subscribed.wait()
        self._own_rejection = None
        try:
            await self.pubsub.publish(self.wire_topic(topic), data)
            opened = self._own_accepted.get(data)
        finally:
            self._own_accepted.pop(data, None)
        rejection, self._own_rejection = self._own_rejection, None
        if rejection is not None:
            raise rejection
        return opened if opened is not None else open_envelope(data, self.validator.max_message_bytes)

    # --------------------------------------------------------------- validation
    def _validator_for(self, topic: str, carrier: str | None = None,
                       rule: ExtraRule | None = None) -> Callable[[ID, rpc_pb2.Message], bool]:
        def validate(forwarder: ID, message: rpc_pb2.Message) -> bool:
            if not self._validate(topic, forwarder, message):
                return False
            return rule is None or self._passes(rule, carrier or topic, forwarder, message.data)

        return validate

    def _passes(self, rule: ExtraRule, carrier: str, forwarder: ID, data: bytes) -> bool:
        """``rule`` over an envelope ``_validate`` accepted; a rejection undoes the acceptance."""
        envelope = self._accepted.get(data)
        if envelope is None:
            return True
        try:
            rejection = rule(envelope)
        except Exception:  # a rule that raises must not kill the pubsub service either
            logger.exception("topic rule crashed topic=%s forwarder=%s", carrier, forwarder)
            rejection = InvalidEnvelope("malformed", "the topic rule failed", envelope.sender)
        if rejection is None:
            return True
        self._accepted.pop(data, None)
        if forwarder == self.pubsub.my_id:
            self._own_rejection = rejection
        else:
            self._record(forwarder, carrier, rejection.reason, data, envelope.sender)
        return False

    def _validate(self, topic: str, forwarder: ID, message: rpc_pb2.Message) -> bool:
        # An exception escaping a sync validator would kill the pubsub service:
        # everything is caught and turned into a rejection.
        data = message.data
        own = forwarder == self.pubsub.my_id
        try:
            envelope = self.validator.check(topic, data, str(forwarder), from_self=own)
        except InvalidEnvelope as error:
            if own:
                self._own_rejection = error
                return False
            if self._is_ignore(error, forwarder):
                self.ignored[error.reason] = self.ignored.get(error.reason, 0) + 1
                logger.debug("gossip ignored peer=%s topic=%s reason=%s", forwarder, topic,
                             error.reason)
                raise IgnoredMessage(error.reason) from None
            self._record(forwarder, topic, error.reason, data, error.sender)
            return False
        except Exception:
            logger.exception("validator crashed topic=%s forwarder=%s", topic, forwarder)
            if not own:
                self._record(forwarder, topic, "malformed", data)
            return False
        self._accepted[data] = envelope
        if own:
            self._own_accepted[data] = envelope  # for publish_sealed, which removes it
            if len(self._own_accepted) > self._accepted_max:  # published around publish_sealed
                del self._own_accepted[next(iter(self._own_accepted))]
        if len(self._accepted) > self._accepted_max:
            self._accepted.popitem(last=False)
        return True

    @staticmethod
    def _is_ignore(error: InvalidEnvelope, forwarder: ID) -> bool:
        if error.reason in IGNORE_REASONS:
            return True
        if error.reason == RATE_LIMITED:
            # Only the origin itself pays for its rate; relays merely passed it on.
            return error.sender is None or peer_id_from_public_key(error.sender) != str(forwarder)
        return False

    def _record(
        self, forwarder: ID, topic: str, reason: str, data: bytes, sender: bytes | None = None
    ) -> None:
        rejection = Rejection(peer_id=str(forwarder), reason=reason, topic=topic, sender=sender)
        logger.info(
            "gossip rejected peer=%s topic=%s reason=%s bytes=%d",
            rejection.peer_id,
            topic,
            reason,
            len(data),
        )
        self.rejections.record(rejection)
        if self._on_rejected is not None:
            self._on_rejected(rejection)

    # -------------------------------------------------------------- receive loops
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe to every topic and run the drain and dispatch loops until cancelled."""
        async with trio.open_nursery() as nursery:
            for topic in self.topics:
                subscription = await self.pubsub.subscribe(self._wire[topic])
                nursery.start_soon(self._drain, topic, subscription)
            nursery.start_soon(self._dispatch)
            self._subscribed.set()
            task_status.started()

    async def _drain(self, topic: str, subscription: ISubscriptionAPI) -> None:
        own_key = self.identity.public_key
        while True:
            message = await subscription.get()
            data = message.data
            envelope = self._accepted.pop(data, None)
            if envelope is None:
                # Validated but evicted from _accepted under extreme load: open again.
                try:
                    envelope = open_envelope(data, self.validator.max_message_bytes)
                except InvalidEnvelope:
                    continue
            if envelope.sender == own_key and not self.deliver_own:
                continue
            try:
                self._inbox_send.send_nowait((topic, envelope))
            except trio.WouldBlock:
                self.dropped += 1
                logger.warning("gossip inbox full, dropped topic=%s seq=%d", topic, envelope.seq)

    async def _dispatch(self) -> None:
        async for topic, envelope in self._inbox_receive:
            self.delivered += 1
            await self.deliver(topic, envelope)

    async def deliver(self, topic: str, envelope: Envelope) -> None:
        """Hand an accepted envelope to the topic's handlers (also for listings sync)."""
        for handler in self._handlers.get(topic, ()):
            try:
                await handler(envelope)
            except Exception:
                logger.exception("gossip handler failed topic=%s kind=%s", topic, envelope.kind)
