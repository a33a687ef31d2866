"""A clock the test moves by hand: code under test takes the time (unix ms) only from it."""

from __future__ import annotations


class HandClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
