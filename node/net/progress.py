"""Which step a long network operation is in, so a timeout can say where it stalled.

A purchase crosses layers under one deadline: the dial (``node.net.reach``: a
direct dial, a DHT lookup, circuits through relays), the request stream
(``node.net.reqresp``), the seller's answer (it settles the payment on chain
before answering), then the buyer's own chain check. When the deadline passes,
"timed out after 30 s" alone tells an operator nothing; the step it was in
does (a seller whose relays are gone is not a slow chain).

``tracking()`` opens a trail for the current task; ``step(name)``, called by
whichever layer is working, appends to the trail of the task that calls it.
trio child tasks start with a copy of their parent's context, so the dial
attempts a purchase spawns write into the purchase's trail. Outside a tracked
operation ``step`` does nothing (one context-variable read).

Steps are short fixed words (``PHASES``) a script can count; ``detail`` is free
text for the log (which relay, which address kind).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

# What a purchase goes through, in order (a step may repeat: a redial after a dead stream).
PHASES = ("gate", "dial", "lookup", "circuit", "stream", "answer", "verify", "ingest", "receipt")
MAX_STEPS = 64


@dataclass
class Trail:
    """The steps taken so far: ``(ms since the start, phase, detail)``, oldest first."""

    started: float = field(default_factory=time.monotonic)
    steps: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def phase(self) -> str:
        """The latest step's phase ("start" before any)."""
        return self.steps[-1][1] if self.steps else "start"

    def describe(self, last: int = 6) -> str:
        """``"dial 0 ms, lookup 1500 ms (…), circuit 1760 ms (relay …)"`` of the last steps."""
        shown = self.steps[-last:]
        return ", ".join(f"{phase} {at} ms" + (f" ({detail})" if detail else "")
                         for at, phase, detail in shown)


_trail: ContextVar[Trail | None] = ContextVar("crystalmesh_progress_trail", default=None)


@contextmanager
def tracking() -> Iterator[Trail]:
    """A fresh trail for the operation run inside the ``with`` block (and its child tasks)."""
    trail = Trail()
    token = _trail.set(trail)
    try:
        yield trail
    finally:
        _trail.reset(token)


def step(phase: str, detail: str = "") -> None:
    """Record that the current operation entered ``phase`` (no-op outside ``tracking``)."""
    trail = _trail.get()
    if trail is None:
        return
    trail.steps.append((int((time.monotonic() - trail.started) * 1000), phase, detail[:120]))
    if len(trail.steps) > MAX_STEPS:
        del trail.steps[0]


def current() -> Trail | None:
    """The trail of the operation this task runs in, if any."""
    return _trail.get()
