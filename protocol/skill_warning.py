"""``skill_warning``: a signed warning that a listing or a skill's content is poison.

Gossiped on the skills topic. It names a listing id, a content hash, or both. Who may
warn and what a receiver does is the node's rule (``docs/protocol.md``, "Skill
warnings"): a management key's warning takes effect at once; a warning from a peer the
receiver holds "trusted" or better counts towards a quorum of distinct trusted senders
within a window; anyone else's warning is carried but changes nothing.

``issued_at_ms`` must equal the envelope's, so the warning's age is covered by the
signature and the clock-window check (a captured warning cannot be replayed later).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from protocol.schema import SHA256_HEX, TIMESTAMP, InvalidMessage, Message, Nullable, Schema, Text

__all__ = ["MAX_WARNING_REASON_CHARS", "SkillWarning"]

MAX_WARNING_REASON_CHARS = 280


@dataclass(frozen=True)
class SkillWarning(Message):
    KIND: ClassVar[str] = "skill_warning"
    FIELDS: ClassVar[Schema] = {
        "listing_id": Nullable(SHA256_HEX),
        "content_hash": Nullable(SHA256_HEX),
        "reason": Text(MAX_WARNING_REASON_CHARS),
        "issued_at_ms": TIMESTAMP,
    }
    listing_id: str | None
    content_hash: str | None
    reason: str
    issued_at_ms: int

    def check(self) -> None:
        if self.listing_id is None and self.content_hash is None:
            raise InvalidMessage("a skill warning names a listing_id, a content_hash or both")

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.issued_at_ms != issued_at_ms:
            raise InvalidMessage("issued_at_ms differs from the envelope's")

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(target for target in (self.listing_id, self.content_hash) if target)
