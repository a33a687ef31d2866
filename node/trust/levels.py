"""Trust levels and the reputation score behind them.

Levels follow Bitterbot: banned < untrusted < provisional < trusted < verified.
Management keys are verified, peers we know nothing about are provisional, and
everyone else is placed by a reputation score in [0, 1].
"""

from __future__ import annotations

from enum import StrEnum

from node.config import TrustConfig


class TrustLevel(StrEnum):
    BANNED = "banned"
    UNTRUSTED = "untrusted"
    PROVISIONAL = "provisional"
    TRUSTED = "trusted"
    VERIFIED = "verified"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: TrustLevel) -> bool:
        """``TrustLevel.PROVISIONAL.at_least(TrustLevel.TRUSTED)`` is False."""
        return self.rank >= other.rank


_RANK = {level: rank for rank, level in enumerate(TrustLevel)}

NEUTRAL_REPUTATION = 0.5
"""Reputation with no evidence at all: an average peer."""
LOCAL_WEIGHT = 0.5
DEFAULT_THRESHOLDS = (TrustConfig.untrusted_below, TrustConfig.provisional_below,
                      TrustConfig.trusted_below)


def relative_score(share: float, population: int) -> float:
    """Map a trust share to [0, 1) so that the average peer scores 0.5.

    ``x = share · population`` (1.0 for a peer holding exactly the average share),
    then ``x / (1 + x)``: 0 → 0, average → 0.5, 3× average → 0.75, 9× → 0.9.
    """
    x = max(0.0, share) * max(0, population)
    return x / (1.0 + x)


def reputation(
    local: float | None,
    global_: float | None,
    n_peers: int,
    *,
    local_peers: int | None = None,
    local_weight: float = LOCAL_WEIGHT,
) -> float:
    """A peer's reputation in [0, 1] from local and global trust.

    - ``global_`` is its EigenTrust value ``t_j`` (Σ t = 1 over ``n_peers``):
      ``g = relative_score(t_j, n_peers)``.
    - ``local`` is our normalised local trust ``c_ij`` (Σ c = 1 over the
      ``local_peers`` we have rated; defaults to ``n_peers``):
      ``l = relative_score(c_ij, local_peers)``.
    - Both known: ``(1 − w)·g + w·l`` with ``w = local_weight`` (0.5): our own
      experience counts as much as the network's view. One known: that one.
      Neither: 0.5 (an average, i.e. provisional, peer).

    Both terms are relative: an average peer scores 0.5, so with the default
    thresholds (0.3, 0.6, 0.85) a peer must hold ≥ 1.5× the average share to be
    trusted and ≥ 5.7× to reach the verified band, and < 0.43× is untrusted.
    """
    parts: list[tuple[float, float]] = []
    if global_ is not None and n_peers > 0:
        parts.append((1.0 - local_weight, relative_score(global_, n_peers)))
    if local is not None:
        count = local_peers if local_peers is not None else n_peers
        if count > 0:
            parts.append((local_weight, relative_score(local, count)))
    if not parts:
        return NEUTRAL_REPUTATION
    if len(parts) == 1:
        return parts[0][1]
    total_weight = sum(weight for weight, _ in parts)
    if total_weight <= 0:
        return sum(score for _, score in parts) / len(parts)
    return sum(weight * score for weight, score in parts) / total_weight


def level_for(
    reputation: float,
    is_management: bool = False,
    banned: bool = False,
    thresholds: tuple[float, float, float] = DEFAULT_THRESHOLDS,
    has_evidence: bool = True,
) -> TrustLevel:
    """Trust level of a peer.

    Order of precedence: banned (an explicit local decision, even for a
    management key) → management keys are verified → no evidence yet is
    provisional → otherwise by reputation: below ``thresholds[0]`` untrusted,
    below ``[1]`` provisional, below ``[2]`` trusted, else verified.
    """
    untrusted_below, provisional_below, trusted_below = thresholds
    if not untrusted_below <= provisional_below <= trusted_below:
        raise ValueError(f"thresholds must be ascending, got {thresholds}")
    if banned:
        return TrustLevel.BANNED
    if is_management:
        return TrustLevel.VERIFIED
    if not has_evidence:
        return TrustLevel.PROVISIONAL
    if reputation < untrusted_below:
        return TrustLevel.UNTRUSTED
    if reputation < provisional_below:
        return TrustLevel.PROVISIONAL
    if reputation < trusted_below:
        return TrustLevel.TRUSTED
    return TrustLevel.VERIFIED
