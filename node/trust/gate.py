"""The ingestion gate: may content from this peer enter our memory?

A pure decision on the peer's trust level and the weather:

- ``banned`` and ``untrusted`` peers are always rejected;
- while a management node's weather alert halts untrusted ingestion
  (``haltUntrustedIngestion``), only ``trusted`` and ``verified`` peers are
  admitted — provisional peers (newcomers) wait until it expires;
- otherwise ``provisional`` and above are admitted.

Management keys are ``verified``, so they pass even during a halt. Reasons are
fixed codes so decisions can be counted and shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.trust.levels import TrustLevel

REASON_OWN = "own"
REASON_BANNED = "banned"
REASON_UNTRUSTED = "untrusted"
REASON_WEATHER_HALT = "weather_halt"
REASON_ADMITTED = "level_ok"

GATE_REASONS = frozenset(
    {REASON_OWN, REASON_BANNED, REASON_UNTRUSTED, REASON_WEATHER_HALT, REASON_ADMITTED}
)


@dataclass(frozen=True)
class GateDecision:
    admitted: bool
    level: TrustLevel
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"admitted": self.admitted, "level": self.level.value, "reason": self.reason}


def decide(level: TrustLevel, halt: bool) -> GateDecision:
    """Admit or reject by ``level``; ``halt`` is the weather's haltUntrustedIngestion."""
    if level is TrustLevel.BANNED:
        return GateDecision(False, level, REASON_BANNED)
    if level is TrustLevel.UNTRUSTED:
        return GateDecision(False, level, REASON_UNTRUSTED)
    if halt and not level.at_least(TrustLevel.TRUSTED):
        return GateDecision(False, level, REASON_WEATHER_HALT)
    return GateDecision(True, level, REASON_ADMITTED)
