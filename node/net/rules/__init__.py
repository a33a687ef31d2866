"""How a message is judged: validation (accept / ignore / reject), per-origin rate limits, replay guards, peer scoring.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.net.rules.ratelimit import TokenBuckets as TokenBuckets
    from node.net.rules.scoring import PeerScores as PeerScores
    from node.net.rules.scoring import ScoringConfig as ScoringConfig
    from node.net.rules.validation import IGNORE_REASONS as IGNORE_REASONS
    from node.net.rules.validation import RATE_LIMITED as RATE_LIMITED
    from node.net.rules.validation import IgnoredMessage as IgnoredMessage
    from node.net.rules.validation import MessageValidator as MessageValidator
    from node.net.rules.validation import RejectHook as RejectHook
    from node.net.rules.validation import Rejection as Rejection
    from node.net.rules.validation import RejectionCounter as RejectionCounter
    from node.net.rules.validation import ReplayGuard as ReplayGuard
    from node.net.rules.validation import rate_limits as rate_limits
    from node.net.rules.validation import wall_clock_ms as wall_clock_ms

__getattr__ = face(__name__)
