"""Signed envelopes: the only thing crystalmesh nodes send each other.

Wire form: a canonical CBOR map of exactly seven keys,

    kind (str), version (int), sender (32-byte Ed25519 public key),
    seq (int), issued_at_ms (int), body (map), signature (64 bytes)

``signature`` is the sender's Ed25519 signature over

    ENVELOPE_DOMAIN || cbor({kind, version, sender, seq, issued_at_ms, body})

The domain prefix keeps an envelope signature from ever being valid as any
other crystalmesh signature (listing endorsements use their own prefix).

:func:`open_envelope` checks, in order: size, canonical CBOR, exact field set
and types, signature, known ``(kind, version)``, body schema. Everything from
"unknown_kind" on is attributable: :attr:`InvalidEnvelope.sender` is set
because the signature was valid. The receiving node's further checks (clock
window, replay, management keys, ...) use the ``REASON_*`` codes below, so
every rejection is counted under one fixed name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.codec import MAX_MESSAGE_BYTES, CodecError, decode, encode
from protocol.identity import Identity, peer_id_from_public_key, verify
from protocol.messages import MESSAGE_TYPES, Message
from protocol.schema import U63_MAX, Bytes, Int, InvalidMessage, Text

__all__ = [
    "DEFAULT_MAX_WEATHER_DURATION_MS",
    "ENVELOPE_DOMAIN",
    "ENVELOPE_KEYS",
    "MAX_CLOCK_SKEW_MS",
    "REASON_BAD_BODY",
    "REASON_BAD_ENDORSEMENT",
    "REASON_BAD_SIGNATURE",
    "REASON_EXPIRED",
    "REASON_EXPIRY_TOO_LONG",
    "REASON_MALFORMED",
    "REASON_NOT_MANAGEMENT",
    "REASON_OVERSIZE",
    "REASON_RATE_LIMITED",
    "REASON_REPLAYED",
    "REASON_SENDER_MISMATCH",
    "REASON_STALE",
    "REASON_UNKNOWN_KIND",
    "REASON_UNTRUSTED",
    "REASON_WRONG_TOPIC",
    "REJECTION_REASONS",
    "Envelope",
    "InvalidEnvelope",
    "open_envelope",
    "seal",
    "sign_envelope",
    "signing_bytes",
]

ENVELOPE_DOMAIN = b"crystalmesh/envelope/v1\x00"
ENVELOPE_KEYS = frozenset({"kind", "version", "sender", "seq", "issued_at_ms", "body", "signature"})

MAX_CLOCK_SKEW_MS = 120_000
"""Receivers reject ``issued_at_ms`` further than this from their clock (either way)."""

DEFAULT_MAX_WEATHER_DURATION_MS = 3_600_000
"""Receivers reject weather alerts whose ``expires_at_ms - issued_at_ms`` exceeds this."""

# Checked by open_envelope.
REASON_OVERSIZE = "oversize"
REASON_MALFORMED = "malformed"
REASON_BAD_SIGNATURE = "bad_signature"
REASON_UNKNOWN_KIND = "unknown_kind"
REASON_BAD_BODY = "bad_body"
# Checked by the receiving node (node/net), which has a clock and state.
REASON_WRONG_TOPIC = "wrong_topic"
REASON_SENDER_MISMATCH = "sender_mismatch"
REASON_STALE = "stale"
REASON_REPLAYED = "replayed"
REASON_EXPIRED = "expired"
REASON_NOT_MANAGEMENT = "not_management"
REASON_EXPIRY_TOO_LONG = "expiry_too_long"
REASON_UNTRUSTED = "untrusted"
REASON_RATE_LIMITED = "rate_limited"
REASON_BAD_ENDORSEMENT = "bad_endorsement"

REJECTION_REASONS = frozenset(
    {
        REASON_OVERSIZE,
        REASON_MALFORMED,
        REASON_BAD_SIGNATURE,
        REASON_UNKNOWN_KIND,
        REASON_BAD_BODY,
        REASON_WRONG_TOPIC,
        REASON_SENDER_MISMATCH,
        REASON_STALE,
        REASON_REPLAYED,
        REASON_EXPIRED,
        REASON_NOT_MANAGEMENT,
        REASON_EXPIRY_TOO_LONG,
        REASON_BAD_ENDORSEMENT,
        REASON_UNTRUSTED,
        REASON_RATE_LIMITED,
    }
)

_KIND = Text(64, pattern=r"[a-z][a-z0-9_]*")
_VERSION = Int(1, 2**16 - 1)
_SENDER = Bytes(32)
_SEQ = Int(0, U63_MAX)
_ISSUED_AT_MS = Int(0, U63_MAX)
_SIGNATURE = Bytes(64)


class InvalidEnvelope(ValueError):
    """An envelope was rejected; ``reason`` is one of :data:`REJECTION_REASONS`.

    ``sender`` is the envelope's public key when its signature was valid (so
    the rejection can be held against that peer), else None.
    """

    def __init__(self, reason: str, detail: str = "", sender: bytes | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.sender = sender


@dataclass(frozen=True)
class Envelope:
    kind: str
    version: int
    sender: bytes
    seq: int
    issued_at_ms: int
    body: dict[str, Any]
    signature: bytes
    _message: Message | None = field(default=None, compare=False, repr=False)

    @property
    def peer_id(self) -> str:
        """The sender's libp2p peer id."""
        return peer_id_from_public_key(self.sender)

    def signing_bytes(self) -> bytes:
        return signing_bytes(
            self.kind, self.version, self.sender, self.seq, self.issued_at_ms, self.body
        )

    def to_bytes(self) -> bytes:
        """The wire form: canonical CBOR of all seven fields."""
        return encode(
            {
                "kind": self.kind,
                "version": self.version,
                "sender": self.sender,
                "seq": self.seq,
                "issued_at_ms": self.issued_at_ms,
                "body": self.body,
                "signature": self.signature,
            }
        )

    def message(self) -> Message:
        """The typed body; raises InvalidEnvelope (unknown_kind / bad_body)."""
        if self._message is not None:
            return self._message
        return _parse_message(self)


def signing_bytes(
    kind: str, version: int, sender: bytes, seq: int, issued_at_ms: int, body: dict[str, Any]
) -> bytes:
    """``ENVELOPE_DOMAIN || cbor(map of the six signed fields)``."""
    signed = {
        "kind": kind,
        "version": version,
        "sender": sender,
        "seq": seq,
        "issued_at_ms": issued_at_ms,
        "body": body,
    }
    return ENVELOPE_DOMAIN + encode(signed)


def sign_envelope(
    identity: Identity,
    kind: str,
    version: int,
    body: dict[str, Any],
    seq: int,
    issued_at_ms: int,
) -> Envelope:
    """Sign without validating the body. For tests and tools; nodes use :func:`seal`."""
    signature = identity.sign(
        signing_bytes(kind, version, identity.public_key, seq, issued_at_ms, body)
    )
    return Envelope(kind, version, identity.public_key, seq, issued_at_ms, body, signature)


def seal(
    identity: Identity,
    kind: str,
    body: Message | dict[str, Any],
    seq: int,
    issued_at_ms: int,
    *,
    version: int = 1,
) -> bytes:
    """Validate ``body`` as ``kind``, sign it and return the envelope's wire bytes.

    Refuses (InvalidEnvelope) anything :func:`open_envelope` would refuse, so a
    node never gossips what its peers must reject.
    """
    if isinstance(body, Message):
        if kind != body.KIND:
            raise InvalidEnvelope(REASON_UNKNOWN_KIND, f"body is {body.KIND!r}, not {kind!r}")
        version = body.VERSION
        message = body
    else:
        message_type = MESSAGE_TYPES.get((kind, version))
        if message_type is None:
            raise InvalidEnvelope(REASON_UNKNOWN_KIND, f"{kind!r} version {version}")
        try:
            message = message_type.from_body(body)
        except InvalidMessage as error:
            raise InvalidEnvelope(REASON_BAD_BODY, str(error)) from error
    for validator, value, name in (
        (_SEQ, seq, "seq"),
        (_ISSUED_AT_MS, issued_at_ms, "issued_at_ms"),
    ):
        try:
            validator.parse(value, name)
        except InvalidMessage as error:
            raise InvalidEnvelope(REASON_MALFORMED, str(error)) from error
    try:
        message.check_envelope(identity.public_key, issued_at_ms)
    except InvalidMessage as error:
        raise InvalidEnvelope(REASON_BAD_BODY, str(error)) from error
    envelope = sign_envelope(identity, kind, version, message.to_body(), seq, issued_at_ms)
    data = envelope.to_bytes()
    if len(data) > MAX_MESSAGE_BYTES:
        raise InvalidEnvelope(REASON_OVERSIZE, f"{len(data)} bytes > {MAX_MESSAGE_BYTES}")
    return data


def open_envelope(data: bytes, max_size: int = MAX_MESSAGE_BYTES) -> Envelope:
    """Decode and fully validate an envelope; raises InvalidEnvelope with a reason."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidEnvelope(REASON_MALFORMED, f"expected bytes, got {type(data).__name__}")
    if len(data) > max_size:
        raise InvalidEnvelope(REASON_OVERSIZE, f"{len(data)} bytes > {max_size}")
    try:
        decoded = decode(bytes(data), max_size=max_size)
    except CodecError as error:
        raise InvalidEnvelope(REASON_MALFORMED, str(error)) from error
    envelope = _envelope_fields(decoded)
    if not verify(envelope.sender, envelope.signing_bytes(), envelope.signature):
        raise InvalidEnvelope(REASON_BAD_SIGNATURE)
    message = _parse_message(envelope)
    return Envelope(
        envelope.kind,
        envelope.version,
        envelope.sender,
        envelope.seq,
        envelope.issued_at_ms,
        envelope.body,
        envelope.signature,
        message,
    )


def _envelope_fields(decoded: Any) -> Envelope:
    if not isinstance(decoded, dict):
        raise InvalidEnvelope(REASON_MALFORMED, "envelope is not a map")
    if set(decoded) != ENVELOPE_KEYS:
        raise InvalidEnvelope(REASON_MALFORMED, f"envelope keys are {sorted(decoded)}")
    if not isinstance(decoded["body"], dict):
        raise InvalidEnvelope(REASON_MALFORMED, "body is not a map")
    try:
        return Envelope(
            kind=_KIND.parse(decoded["kind"], "kind"),
            version=_VERSION.parse(decoded["version"], "version"),
            sender=_SENDER.parse(decoded["sender"], "sender"),
            seq=_SEQ.parse(decoded["seq"], "seq"),
            issued_at_ms=_ISSUED_AT_MS.parse(decoded["issued_at_ms"], "issued_at_ms"),
            body=decoded["body"],
            signature=_SIGNATURE.parse(decoded["signature"], "signature"),
        )
    except InvalidMessage as error:
        raise InvalidEnvelope(REASON_MALFORMED, str(error)) from error


def _parse_message(envelope: Envelope) -> Message:
    message_type = MESSAGE_TYPES.get((envelope.kind, envelope.version))
    if message_type is None:
        raise InvalidEnvelope(
            REASON_UNKNOWN_KIND, f"{envelope.kind!r} version {envelope.version}", envelope.sender
        )
    try:
        message = message_type.from_body(envelope.body)
        message.check_envelope(envelope.sender, envelope.issued_at_ms)
    except InvalidMessage as error:
        raise InvalidEnvelope(REASON_BAD_BODY, str(error), envelope.sender) from error
    return message
