"""Token buckets per key, bounded in memory: the rate limits of gossip intake.

A bucket holds up to ``burst`` tokens and refills at ``per_minute / 60`` per
second. ``allows(key)`` asks without spending (validation must not half-apply:
a message rejected for another reason keeps its token); ``spend(key)`` takes
one when the message is accepted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class TokenBuckets:
    def __init__(
        self,
        per_minute: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 8192,
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("a rate limit needs per_minute > 0 and burst >= 1")
        self.rate_per_s = per_minute / 60.0
        self.burst = float(burst)
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def _tokens(self, key: Hashable, now: float) -> float:
        entry = self._buckets.get(key)
        if entry is None:
            return self.burst
        tokens, at = entry
        return min(self.burst, tokens + (now - at) * self.rate_per_s)

    def allows(self, key: Hashable, count: int = 1) -> bool:
        return self._tokens(key, self.clock()) >= count

    def spend(self, key: Hashable, count: int = 1) -> None:
        now = self.clock()
        self._buckets[key] = (self._tokens(key, now) - count, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
