"""Gossip message validation: pure checks, no I/O, injectable clock.

``MessageValidator.check(topic, data, from_peer)`` returns the opened
``Envelope`` or raises ``InvalidEnvelope`` whose ``reason`` names the rule that
failed. The envelope layer (``protocol.envelope.open_envelope``) rejects
oversize, malformed CBOR, unknown kind/version, bad signature and bad body;
this module adds the rules that need network context:

- the kind must be allowed on the topic it arrived on (``wrong_topic``);
- ``issued_at`` must be within ``clock_window_s`` of our clock (``stale``);
- (sender, seq) must be new (``replayed``), see ``ReplayGuard``; for weather
  it must also be above every alert already accepted from that sender, so a
  captured older alert can never be replayed over a newer one (listings keep
  the reorder window: they are independent, and gossip reorders them);
- weather must be signed by a management key (``not_management``), last at
  most ``max_weather_duration_s`` (``expiry_too_long``) and not be over
  already (``expired``); a ``weather_lift`` (the same key ending its alerts
  early) obeys the same key, clock and seq rules.

- at most ``rate_limits[topic]`` accepted messages per origin key
  (``rate_limited``): by default listings 10 per minute with a burst of 30,
  trust reports 120 per minute with a burst of 120, bounties 5 with a burst of
  10 (``net.origin_*`` in node.toml, ``rate_limits(config)``); weather is
  bounded by its strict seq rule.

- a ``skill_warning`` (skills topic) is also held to its own, tighter budget per origin
  key (``WARNING_RATE_LIMIT``: 6 per minute, burst 6; management keys exempt). Who may
  warn, and the quorum, are the warning desk's rule (``node.market.warnings``), not the
  validator's: trust is a local opinion, so a relay never pays for forwarding a warning.

- a ``listing_batch`` (a seller's catalogue in one message) is one message
  against that limit, and every entry must pass the listings sync rules
  (``check_synced``), be signed by the batch's own sender and be a listing or
  a withdrawal; its entries count against the origin's *catalogue* budget
  (``batch_rate_limits``: 60 per minute, burst 512). One bad entry rejects the
  whole batch, and nothing is spent unless all of it is accepted.

A check never half-applies: the replay high-water mark and the rate-limit
tokens only move when the whole message is accepted, so a rejected message
cannot burn a sequence number or a token that a later, valid message needs.

Outcomes, as in Lighthouse: **accept**; **ignore** (``IGNORE_REASONS``: the
message may be honest and merely late, early, repeated or of a kind we do not
know; nobody is penalised, the message is dropped and not forwarded);
**reject** (everything else: a relay that validates before forwarding would
never have passed it on, so it costs the peer that handed it to us). A
``rate_limited`` message is rejected only when the peer handing it to us is
its origin; relays of an over-eager origin are ignored.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from node.config import ConfigError, NetConfig
from node.net.rules.ratelimit import TokenBuckets
from node.net.rules.replay import ReplayGuard
from protocol.codec import MAX_MESSAGE_BYTES
from protocol.envelope import (
    REASON_BAD_BODY,
    REASON_BAD_ENDORSEMENT,
    REASON_EXPIRED,
    REASON_EXPIRY_TOO_LONG,
    REASON_NOT_MANAGEMENT,
    REASON_OVERSIZE,
    REASON_RATE_LIMITED,
    REASON_REPLAYED,
    REASON_STALE,
    REASON_UNKNOWN_KIND,
    REASON_WRONG_TOPIC,
    Envelope,
    InvalidEnvelope,
    open_envelope,
)
from protocol.liveness import (
    NOTICE_SYNC_LIFETIME_MS,
    TRUST_REPORT_SYNC_MAX_AGE_MS,
    WITHDRAWAL_LIFETIME_MS,
)
from protocol.messages import (
    Bounty,
    EndorsementRevocation,
    ListingBatch,
    ListingEndorsement,
    ListingWithdrawal,
    SkillListing,
    SkillWarning,
    TrustReport,
    WeatherAlert,
    WeatherLift,
    verify_endorsement,
)
from protocol.topics import (
    BATCHABLE_KINDS,
    BOUNTIES,
    SKILLS,
    SYNCABLE_KINDS,
    SYNCABLE_KINDS_V1,
    TOPIC_KINDS,
    TRUST,
    WEATHER,
)

logger = logging.getLogger(__name__)

OVERSIZE = REASON_OVERSIZE
WRONG_TOPIC = REASON_WRONG_TOPIC
STALE = REASON_STALE
REPLAYED = REASON_REPLAYED
NOT_MANAGEMENT = REASON_NOT_MANAGEMENT
EXPIRY_TOO_LONG = REASON_EXPIRY_TOO_LONG
EXPIRED = REASON_EXPIRED
BAD_BODY = REASON_BAD_BODY
RATE_LIMITED = REASON_RATE_LIMITED

IGNORE_REASONS = frozenset({REASON_STALE, REASON_REPLAYED, REASON_EXPIRED, REASON_UNKNOWN_KIND})
"""Reasons that say nothing bad about the peer that relayed the message."""


def rate_limits(config: NetConfig) -> dict[str, tuple[float, int]]:
    """(per minute, burst) per origin key for each rate-limited topic, from ``net.origin_*``.

    Raises ``ConfigError`` for a limit no bucket can hold (a rate <= 0 or a burst < 1).
    """
    limits = {
        SKILLS: ("origin_listings", config.origin_listings_per_min, config.origin_listings_burst),
        TRUST: ("origin_trust_reports", config.origin_trust_reports_per_min,
                config.origin_trust_reports_burst),
        BOUNTIES: ("origin_bounties", config.origin_bounties_per_min, config.origin_bounties_burst),
    }
    for name, per_minute, burst in limits.values():
        if per_minute <= 0 or burst < 1:
            raise ConfigError(f"net.{name}_per_min must be > 0 and net.{name}_burst >= 1, "
                              f"not {per_minute} and {burst}")
    return {topic: (per_minute, burst) for topic, (_, per_minute, burst) in limits.items()}


# The defaults, written once in NetConfig. Trust reports: a node reports every
# ``trust.report_interval_s`` (10 s by default, 1 s in tests; node/trust/cadence.py), and only its latest report
# counts, so the cap only has to stop floods.
DEFAULT_RATE_LIMITS: dict[str, tuple[float, int]] = rate_limits(NetConfig())
# Envelopes taken in through the listings sync protocol are a seller's whole live
# catalogue at once, not fresh announcements: a larger burst per origin key.
DEFAULT_SYNC_RATE_LIMITS: dict[str, tuple[float, int]] = {SKILLS: (60.0, 512), BOUNTIES: (20.0, 64),
                                                           TRUST: (20.0, 8)}
# Entries of listing batches per origin key: a seller announcing its whole catalogue at once
# (the batch message itself is one of its skills-topic messages). As large as a sync's burst:
# a catalogue that a late joiner may take in at once may as well be announced at once.
DEFAULT_BATCH_RATE_LIMITS: dict[str, tuple[float, int]] = {SKILLS: (60.0, 512)}
# Skill warnings per origin key: a node finds poison rarely; a flood of warnings is an attack
# on attention (each one makes every receiver look the target up).
WARNING_RATE_LIMIT: tuple[float, int] = (6.0, 6)


class IgnoredMessage(Exception):
    """Raised from a topic validator to drop a message without penalising its forwarder.

    py-libp2p's validators can only say valid/invalid, and invalid costs the
    forwarder gossipsub score; our containment layer (``libp2p_tuning``)
    drops a message that raised this and charges nobody.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _reject(reason: str, detail: str, sender: bytes | None = None) -> InvalidEnvelope:
    return InvalidEnvelope(reason, detail, sender)


RejectHook = Callable[["Rejection"], None]


@dataclass(frozen=True)
class Rejection:
    """One rejected message: who handed it to us, why, and who it claimed to be from."""

    peer_id: str
    reason: str
    topic: str
    sender: bytes | None = None


class RejectionCounter:
    """Rejections per forwarding peer and reason, read by the trust layer and scoring.

    ``peer_id`` is the libp2p peer that delivered the message (gossipsub
    forwarders validate before forwarding, so an honest relay does not pass on
    invalid messages). Bounded: at most ``max_peers`` peers, oldest first out.
    """

    def __init__(self, max_peers: int = 4096) -> None:
        self.max_peers = max_peers
        self._counts: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._hooks: list[RejectHook] = []

    def on_reject(self, hook: RejectHook) -> None:
        """Call ``hook(rejection)`` for every rejection (must not block; exceptions are logged)."""
        self._hooks.append(hook)

    def record(self, rejection: Rejection) -> None:
        counts = self._counts.get(rejection.peer_id)
        if counts is None:
            if len(self._counts) >= self.max_peers:
                self._counts.popitem(last=False)
            counts = self._counts[rejection.peer_id] = {}
        else:
            self._counts.move_to_end(rejection.peer_id)
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
        for hook in self._hooks:
            try:
                hook(rejection)
            except Exception:
                logger.exception("on_reject hook failed peer=%s", rejection.peer_id)

    def counts(self, peer_id: str) -> dict[str, int]:
        return dict(self._counts.get(peer_id, {}))

    def total(self, peer_id: str) -> int:
        return sum(self._counts.get(peer_id, {}).values())

    def peers(self) -> list[str]:
        return list(self._counts)


class MessageValidator:
    """Checks one gossip message against every rule; see the module docstring."""

    def __init__(
        self,
        management_keys: Iterable[bytes],
        clock_window_s: int = 120,
        max_weather_duration_s: int = 3600,
        now_ms: Clock = wall_clock_ms,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        replay_guard: ReplayGuard | None = None,
        rate_limits: dict[str, tuple[float, int]] | None = None,
        sync_rate_limits: dict[str, tuple[float, int]] | None = None,
        batch_rate_limits: dict[str, tuple[float, int]] | None = None,
        warning_rate_limit: tuple[float, int] = WARNING_RATE_LIMIT,
        own_key: bytes | None = None,
    ) -> None:
        self.management_keys = frozenset(bytes(key) for key in management_keys)
        # Our own signing key: a peer passing back one of our messages (a restarted node
        # hears its old listings again) is not our origin spending its rate; only what
        # we publish ourselves is held to it (peers would refuse more than that).
        self.own_key = bytes(own_key) if own_key is not None else None
        self.clock_window_ms = int(clock_window_s * 1000)
        self.max_weather_duration_ms = int(max_weather_duration_s * 1000)
        self.now_ms = now_ms
        self.max_message_bytes = max_message_bytes
        self.replay_guard = replay_guard if replay_guard is not None else ReplayGuard()
        limits = DEFAULT_RATE_LIMITS if rate_limits is None else rate_limits
        self.rate_limits = {
            topic: TokenBuckets(per_minute, burst) for topic, (per_minute, burst) in limits.items()
        }
        sync_limits = DEFAULT_SYNC_RATE_LIMITS if sync_rate_limits is None else sync_rate_limits
        self.sync_rate_limits = {
            topic: TokenBuckets(per_minute, burst)
            for topic, (per_minute, burst) in sync_limits.items()
        }
        batch_limits = DEFAULT_BATCH_RATE_LIMITS if batch_rate_limits is None else batch_rate_limits
        self.batch_rate_limits = {
            topic: TokenBuckets(per_minute, burst)
            for topic, (per_minute, burst) in batch_limits.items()
        }
        self.warning_rate_limit = TokenBuckets(*warning_rate_limit)
        # Per management key: only a handful of keys, so this stays tiny.
        self._weather_high_water: dict[bytes, int] = {}

    def check(self, topic: str, data: bytes, from_peer: str | None = None,
              from_self: bool = False) -> Envelope:
        """Return the envelope if ``data`` is acceptable on ``topic``; else raise InvalidEnvelope.

        ``from_peer`` is only used in log lines; counting is the caller's job
        (see ``RejectionCounter``) so that this stays a pure function of its
        inputs, the clock and the replay state.
        """
        envelope = self.inspect(topic, data, from_self)
        self.replay_guard.commit(envelope.sender, envelope.seq)
        if self._echo(envelope, from_self):
            return envelope
        if topic in self.rate_limits:
            self.rate_limits[topic].spend(envelope.sender)
        if topic == WEATHER:
            self._weather_high_water[envelope.sender] = envelope.seq
        if envelope.kind == SkillWarning.KIND:
            self.warning_rate_limit.spend(envelope.sender)
        if envelope.kind == ListingBatch.KIND and topic in self.batch_rate_limits:
            entries = len(envelope.message().entries)  # type: ignore[attr-defined]
            self.batch_rate_limits[topic].spend(envelope.sender, entries)
        return envelope

    def _echo(self, envelope: Envelope, from_self: bool) -> bool:
        """One of our own messages, passed back to us by a peer."""
        return not from_self and self.own_key is not None and envelope.sender == self.own_key

    def inspect(self, topic: str, data: bytes, from_self: bool = False) -> Envelope:
        """All checks of ``check`` without recording the (sender, seq) as seen."""
        if len(data) > self.max_message_bytes:
            raise _reject(OVERSIZE, f"{len(data)} bytes > {self.max_message_bytes}")
        envelope = open_envelope(data, self.max_message_bytes)
        allowed = TOPIC_KINDS.get(topic)
        if allowed is None or envelope.kind not in allowed:
            raise _reject(
                WRONG_TOPIC, f"kind {envelope.kind!r} not allowed on {topic!r}", envelope.sender
            )
        now = self.now_ms()
        if abs(envelope.issued_at_ms - now) > self.clock_window_ms:
            raise _reject(STALE, f"issued_at {envelope.issued_at_ms} vs now {now}", envelope.sender)
        if topic == WEATHER:
            self._check_weather(envelope, now)
        if topic == SKILLS:
            self._check_endorsement(envelope)
        if not self.replay_guard.is_new(envelope.sender, envelope.seq):
            raise _reject(REPLAYED, f"seq {envelope.seq} already seen or too old", envelope.sender)
        if topic == WEATHER and envelope.seq <= self._weather_high_water.get(envelope.sender, -1):
            raise _reject(REPLAYED, f"seq {envelope.seq} older than the latest alert", envelope.sender)
        if self._echo(envelope, from_self):  # signed with our key: ours, nothing to budget
            return envelope
        buckets = self.rate_limits.get(topic)
        if buckets is not None and envelope.sender not in self.management_keys \
                and not buckets.allows(envelope.sender):
            raise _reject(RATE_LIMITED, f"origin over its {topic} rate limit", envelope.sender)
        if envelope.kind == SkillWarning.KIND and envelope.sender not in self.management_keys \
                and not self.warning_rate_limit.allows(envelope.sender):
            raise _reject(RATE_LIMITED, "origin over its skill warning rate limit", envelope.sender)
        if envelope.kind == ListingBatch.KIND:
            self._check_batch(topic, envelope)
        return envelope

    def _check_batch(self, topic: str, envelope: Envelope) -> None:
        """Every entry as a synced listing of the batch's own sender, and the whole batch
        within the origin's catalogue budget; spends nothing."""
        batch = envelope.message()
        assert isinstance(batch, ListingBatch)
        for entry in batch.entries:
            try:
                inner, _ = self._inspect_synced(entry)
            except InvalidEnvelope as error:
                raise _reject(error.reason, f"batch entry: {error}", envelope.sender) from None
            if inner.sender != envelope.sender:
                raise _reject(BAD_BODY, "a batch carries only its sender's own listings",
                              envelope.sender)
            if inner.kind not in BATCHABLE_KINDS:
                raise _reject(WRONG_TOPIC, f"kind {inner.kind!r} may not travel in a batch",
                              envelope.sender)
        buckets = self.batch_rate_limits.get(topic)
        if buckets is not None and envelope.sender not in self.management_keys \
                and not buckets.allows(envelope.sender, len(batch.entries)):
            raise _reject(RATE_LIMITED, f"origin over its {topic} catalogue budget",
                          envelope.sender)

    def check_synced(self, data: bytes, kinds: Mapping[str, str] = SYNCABLE_KINDS) -> Envelope:
        """Validate one envelope from a listings sync page; raise InvalidEnvelope.

        The same checks as gossip on the kind's topic (size, encoding,
        signature, body, endorsement, rate limit per origin key), with two
        rules adapted to state that is re-served later: ``issued_at`` may be
        old but not in the future beyond the clock window (``stale``), and the
        message must still be live (``expired``: a listing's or bounty's
        ``expires_at_ms``, a withdrawal's issue + 7 days). The (sender, seq)
        replay rule is the listing book's: older states are ignored there.
        A skill warning or an endorsement revocation (``listings-sync/2`` only:
        ``kinds``) lives ``NOTICE_SYNC_LIFETIME_MS`` past its issue; who may
        warn is the warning desk's rule, as for gossip.
        """
        envelope, topic = self._inspect_synced(data, kinds)
        buckets = self.sync_rate_limits.get(topic)
        if buckets is not None and envelope.sender not in self.management_keys:
            if not buckets.allows(envelope.sender):
                raise _reject(RATE_LIMITED, f"origin over its synced {topic} limit", envelope.sender)
            buckets.spend(envelope.sender)
        return envelope

    def _inspect_synced(self, data: bytes, kinds: Mapping[str, str] = SYNCABLE_KINDS_V1
                        ) -> tuple[Envelope, str]:
        """``check_synced`` but the per-origin limit: the envelope and its kind's topic."""
        if len(data) > self.max_message_bytes:
            raise _reject(OVERSIZE, f"{len(data)} bytes > {self.max_message_bytes}")
        envelope = open_envelope(data, self.max_message_bytes)
        topic = kinds.get(envelope.kind)
        if topic is None:
            raise _reject(WRONG_TOPIC, f"kind {envelope.kind!r} is not synced", envelope.sender)
        now = self.now_ms()
        if envelope.issued_at_ms > now + self.clock_window_ms:
            raise _reject(STALE, f"issued_at {envelope.issued_at_ms} in the future", envelope.sender)
        message = envelope.message()
        if isinstance(message, SkillListing | Bounty):
            expires = message.expires_at_ms
        elif isinstance(message, SkillWarning | EndorsementRevocation):
            expires = envelope.issued_at_ms + NOTICE_SYNC_LIFETIME_MS
        elif isinstance(message, TrustReport):
            expires = envelope.issued_at_ms + TRUST_REPORT_SYNC_MAX_AGE_MS
        else:
            assert isinstance(message, ListingWithdrawal)
            expires = envelope.issued_at_ms + WITHDRAWAL_LIFETIME_MS
        if expires <= now:
            raise _reject(EXPIRED, f"expired at {expires}, now {now}", envelope.sender)
        if topic == SKILLS:
            self._check_endorsement(envelope)
        return envelope, topic

    def _check_endorsement(self, envelope: Envelope) -> None:
        """An endorsement means a configured management key vouched: anything else is forged."""
        message = envelope.message()
        if isinstance(message, ListingEndorsement | EndorsementRevocation):
            if envelope.sender not in self.management_keys:
                raise _reject(NOT_MANAGEMENT, "endorsements and their revocations come from "
                              "management keys", envelope.sender)
        elif isinstance(message, SkillListing) and message.endorsement is not None:
            key = message.endorsement.management_key
            if key not in self.management_keys or not verify_endorsement(message):
                raise _reject(REASON_BAD_ENDORSEMENT, "endorsement is not a management key's valid "
                              "signature over this listing", envelope.sender)

    def _check_weather(self, envelope: Envelope, now: int) -> None:
        if envelope.sender not in self.management_keys:
            raise _reject(
                NOT_MANAGEMENT, "weather must be signed by a management key", envelope.sender
            )
        alert = envelope.message()
        if isinstance(alert, WeatherLift):
            return  # no lifetime of its own; the seq high-water mark below makes it replay-proof
        if not isinstance(alert, WeatherAlert):
            raise _reject(WRONG_TOPIC, "weather topic carries only weather alerts and lifts",
                          envelope.sender)
        # WeatherAlert.check_envelope already ties alert.issued_at_ms to the envelope's.
        duration_ms = alert.expires_at_ms - envelope.issued_at_ms
        if duration_ms <= 0:
            raise _reject(BAD_BODY, "expires_at before issued_at", envelope.sender)
        if duration_ms > self.max_weather_duration_ms:
            raise _reject(
                EXPIRY_TOO_LONG,
                f"{duration_ms} ms > {self.max_weather_duration_ms} ms",
                envelope.sender,
            )
        if alert.expires_at_ms <= now:
            raise _reject(EXPIRED, f"expired at {alert.expires_at_ms}, now {now}", envelope.sender)
