"""What the trust ledger records: event kinds, their weights, the per-peer aggregate.

Pure values (no I/O); :mod:`node.trust.ledger` stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from node.errors import CrystalmeshError


class TrustEvent(StrEnum):
    DELIVERED_OK = "delivered_ok"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_TAMPERED = "delivery_tampered"
    EXECUTION_SUCCESS = "execution_success"
    EXECUTION_FAILURE = "execution_failure"
    INVALID_MESSAGE = "invalid_message"
    SKILL_QUARANTINED = "skill_quarantined"

    @property
    def satisfactory(self) -> bool:
        return self in _SATISFACTORY


_SATISFACTORY = frozenset({TrustEvent.DELIVERED_OK, TrustEvent.EXECUTION_SUCCESS})


class UnknownPeerKey(CrystalmeshError, ValueError):
    http_status = 404
    code = "unknown_peer"

    """A peer key is not a 32-byte Ed25519 public key (bytes or 64 hex digits)."""


def peer_key_hex(peer_key: bytes | str) -> str:
    """Canonical ledger key: lower-case hex of the 32-byte public key."""
    if isinstance(peer_key, bytes | bytearray):
        if len(peer_key) != 32:
            raise UnknownPeerKey(f"a peer key is 32 bytes, got {len(peer_key)}")
        return bytes(peer_key).hex()
    text = str(peer_key).strip().lower()
    try:
        raw = bytes.fromhex(text)
    except ValueError as error:
        raise UnknownPeerKey(f"not a hex public key: {peer_key!r}") from error
    if len(raw) != 32:
        raise UnknownPeerKey(f"a peer key is 32 bytes, got {len(raw)}")
    return text


# Reasons a gossip message is rejected (protocol.envelope.REASON_*), by weight.
# Forged or garbage data is never an honest mistake: those are offences. Timing
# and replay rejections happen to honest peers (clock skew, gossip races), and
# "untrusted"/"rate_limited" are our own policy, so they weigh nothing here
# (the gossipsub peer score already handles them).
DEFAULT_INVALID_MESSAGE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "bad_signature": 5.0,
        "malformed": 5.0,
        "oversize": 5.0,
        "not_management": 5.0,
        "sender_mismatch": 5.0,
        "bad_body": 2.0,
        "wrong_topic": 2.0,
        "wrong_shard": 2.0,
        "expiry_too_long": 2.0,
        "unknown_kind": 0.5,
        "stale": 0.0,
        "replayed": 0.0,
        "expired": 0.0,
        "rate_limited": 0.0,
        "untrusted": 0.0,
    }
)
DEFAULT_OFFENCE_REASONS = frozenset(
    {"bad_signature", "malformed", "oversize", "not_management", "sender_mismatch"}
)


@dataclass(frozen=True)
class EventWeights:
    """How much each event moves ``s_ij`` (all magnitudes ≥ 0; the sign comes from the kind).

    A poisoned skill is delivered intact (``delivered_ok``, +1) and then fails
    (``execution_failure``, −2), so selling poison always nets negative trust;
    an honest sale nets +2.
    """

    delivered_ok: float = 1.0
    execution_success: float = 1.0
    delivery_failed: float = 1.0
    execution_failure: float = 2.0
    delivery_tampered: float = 10.0
    # A delivered skill the scanner (or a network warning) found poisoned: worse than one
    # failed run (2) since it would have gone into the agent's context unread.
    skill_quarantined: float = 5.0
    invalid_message: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_INVALID_MESSAGE_WEIGHTS)
    )
    invalid_message_default: float = 1.0
    offence_reasons: frozenset[str] = DEFAULT_OFFENCE_REASONS

    def weight(self, event: TrustEvent, detail: str = "") -> float:
        if event is TrustEvent.INVALID_MESSAGE:
            return float(self.invalid_message.get(detail, self.invalid_message_default))
        return float(getattr(self, event.value))

    def is_offence(self, event: TrustEvent, detail: str = "") -> bool:
        if event is TrustEvent.DELIVERY_TAMPERED:
            return True
        return event is TrustEvent.INVALID_MESSAGE and detail in self.offence_reasons


@dataclass(frozen=True)
class PeerRecord:
    """One row of ``trust_peers``: the aggregate of every event about a peer."""

    peer_key: str
    satisfactory: float = 0.0
    unsatisfactory: float = 0.0
    events: int = 0
    offences: int = 0
    banned: bool = False
    first_seen_ms: int = 0
    last_event_ms: int = 0
    last_reason: str = ""

    @property
    def local_trust(self) -> float:
        """``s_ij``: satisfactory minus unsatisfactory weight."""
        return self.satisfactory - self.unsatisfactory

    @property
    def has_evidence(self) -> bool:
        """True once some weighted event is known (zero-weight events do not count)."""
        return self.satisfactory > 0 or self.unsatisfactory > 0 or self.offences > 0
