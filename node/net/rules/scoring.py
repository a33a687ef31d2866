"""Peer score from rejected gossip, and the decision to cut a peer off.

py-libp2p 0.8.1 keeps a gossipsub ``PeerScorer`` but, left unconfigured, it
scores everyone 0, and even configured it never disconnects anybody. So the
score that matters lives here: every rejection adds a penalty weighted by
reason, penalties decay exponentially (a peer that behaves recovers), and a
peer whose score falls below ``ban_threshold`` is disconnected and
blacklisted by the net service. The same score is handed to gossipsub as its
application-specific score (P6), so mesh maintenance also prefers good peers.

    score(peer) = - sum(weight(reason) * 0.5 ** (age_s / half_life_s))
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Forged or garbage data is never an honest mistake; timing and replay
# rejections can be (clock skew, gossip races), so they weigh little.
DEFAULT_REASON_WEIGHTS: Mapping[str, float] = {
    "bad_signature": 20.0,
    "malformed": 20.0,
    "oversize": 20.0,
    "bad_body": 10.0,
    "unknown_kind": 5.0,
    "wrong_topic": 10.0,
    # A listing on a shard topic its category does not hash to (node/net/shards.py).
    "wrong_shard": 10.0,
    "not_management": 20.0,
    "bad_endorsement": 20.0,
    "expiry_too_long": 10.0,
    "expired": 2.0,
    "stale": 2.0,
    "replayed": 2.0,
    # The origin itself overran a documented limit after its burst allowance (relays are
    # never charged for it). py-libp2p's own score gate may drop its next messages before
    # they reach validation, so a single overrun must already cross the ban threshold.
    "rate_limited": 60.0,
    # Listings sync: a peer that does not answer a page in time, or answers more than asked.
    "sync_stalled": 10.0,
    "sync_overrun": 20.0,
}


@dataclass(frozen=True)
class ScoringConfig:
    reason_weights: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_REASON_WEIGHTS)
    )
    default_weight: float = 5.0
    half_life_s: float = 600.0
    # With the weights above: three forged messages, or fifty stale ones in a few minutes.
    ban_threshold: float = -50.0
    max_peers: int = 4096


class PeerScores:
    """Decaying penalty per peer (peer ids as base58 strings)."""

    def __init__(
        self,
        config: ScoringConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or ScoringConfig()
        self.clock = clock
        self._decay_per_s = math.log(2) / self.config.half_life_s
        # peer -> (penalty at the time of the last update, time of that update)
        self._penalties: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _current(self, peer_id: str, now: float) -> float:
        entry = self._penalties.get(peer_id)
        if entry is None:
            return 0.0
        penalty, at = entry
        return penalty * math.exp(-self._decay_per_s * max(0.0, now - at))

    def penalize(self, peer_id: str, reason: str) -> float:
        """Add the penalty for one rejection; return the peer's new score."""
        weight = self.config.reason_weights.get(reason, self.config.default_weight)
        now = self.clock()
        penalty = self._current(peer_id, now) + weight
        self._penalties[peer_id] = (penalty, now)
        self._penalties.move_to_end(peer_id)
        while len(self._penalties) > self.config.max_peers:
            self._penalties.popitem(last=False)
        return -penalty

    def score(self, peer_id: str) -> float:
        penalty = self._current(peer_id, self.clock())
        return -penalty if penalty else 0.0

    def below_threshold(self, peer_id: str) -> bool:
        return self.score(peer_id) < self.config.ban_threshold

    def forget(self, peer_id: str) -> None:
        self._penalties.pop(peer_id, None)
