"""Trust reports: our local-trust row on the wire, and the network matrix built from theirs.

Bitterbot's EigenTrust only ever saw the local node's edges, so "global"
trust was local trust with extra steps. Here every node gossips its normalised
row ``c_i·`` as a signed :class:`protocol.messages.TrustReport`, and each node
assembles the matrix ``C`` from the latest report of every sender plus its
own row, then runs EigenTrust over it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from node.trust.ledger import peer_key_hex
from protocol.messages import MAX_TRUST_ROW_ENTRIES, PPM, TrustEntry, TrustReport


def to_ppm(weights: list[float]) -> list[int]:
    """Integer parts per million of ``weights`` normalised to sum 1 (largest remainder).

    The result sums to exactly 1_000_000 (when any weight is positive) and never
    exceeds it; non-positive weights get 0.
    """
    positive = [max(0.0, weight) for weight in weights]
    total = sum(positive)
    if total <= 0:
        return [0] * len(weights)
    exact = [weight / total * PPM for weight in positive]
    floors = [math.floor(value) for value in exact]
    remainder = PPM - sum(floors)
    by_fraction = sorted(range(len(exact)), key=lambda i: (exact[i] - floors[i], -i), reverse=True)
    for i in by_fraction[:remainder]:
        floors[i] += 1
    return floors


def build_report(
    row: Mapping[str, float],
    epoch: int,
    own_key: bytes,
    exclude: Collection[str] = (),
    distrusted: Collection[str] = (),
    max_entries: int = MAX_TRUST_ROW_ENTRIES,
) -> TrustReport:
    """Our TrustReport: the top ``max_entries`` peers of ``row`` (``c_ij``) in ppm.

    Self and ``exclude`` (hex keys) are left out; the kept entries are
    renormalised so the row sums to 1_000_000 ppm, entries that round to 0 ppm
    are dropped. Remaining room (up to ``max_entries``) goes to ``distrusted``
    peers as 0-ppm entries: ``c_ij = 0`` for a peer we dealt with and found
    wanting, which receivers count against it (see ``node.trust.policy``).
    Order: highest weight first, then key.
    """
    own = own_key.hex()
    skip = set(exclude) | {own}
    candidates = [(key, value) for key, value in row.items() if key not in skip and value > 0]
    candidates.sort(key=lambda item: (-item[1], item[0]))
    kept = candidates[:max_entries]
    ppm = to_ppm([value for _, value in kept])
    entries = [
        TrustEntry(bytes.fromhex(key), weight)
        for (key, _), weight in zip(kept, ppm, strict=True)
        if weight > 0
    ]
    listed = {entry.peer.hex() for entry in entries}
    for key in sorted(set(distrusted) - skip - listed - set(row))[: max_entries - len(entries)]:
        entries.append(TrustEntry(bytes.fromhex(key), 0))
    return TrustReport(epoch=epoch, row=tuple(entries))


@dataclass(frozen=True)
class ReceivedReport:
    """The latest report of one sender, as weights in [0, 1] keyed by hex public key.

    A weight of 0 is a distrust entry (the sender dealt with that peer and found it wanting)."""

    sender: str
    epoch: int
    issued_at_ms: int
    row: dict[str, float]


class TrustMatrix:
    """The network's local-trust matrix as seen from here.

    Keeps the latest report per sender (by ``epoch``; older or equal epochs
    are ignored), drops reports whose ``issued_at_ms`` is older than
    ``max_age_s``, ignores our own reports (our live row is used instead) and
    any entry of a sender about itself. Memory is bounded by ``max_senders``;
    when full, the report of the sender with the lowest ``priority`` (its
    global trust, set by the service) is evicted, oldest first among equals,
    so a flood of fresh Sybil keys pushes out Sybils, not trusted peers.
    """

    def __init__(
        self,
        own_key: bytes,
        max_age_s: float,
        max_senders: int = 4096,
        priority: Callable[[str], float] = lambda sender: 0.0,
    ) -> None:
        self.own_key = own_key.hex()
        self.max_age_ms = int(max_age_s * 1000)
        self.max_senders = max_senders
        self.priority = priority
        self._reports: dict[str, ReceivedReport] = {}

    def __len__(self) -> int:
        return len(self._reports)

    def add(self, sender: bytes | str, report: TrustReport, issued_at_ms: int, now_ms: int) -> bool:
        """Keep ``report`` if it is the sender's newest and fresh; True if kept."""
        key = peer_key_hex(sender)
        if key == self.own_key or now_ms - issued_at_ms > self.max_age_ms:
            return False
        current = self._reports.get(key)
        if current is not None and report.epoch <= current.epoch:
            return False
        row: dict[str, float] = {}
        for entry in report.row:
            peer = entry.peer.hex()
            if peer != key:
                row[peer] = entry.weight_ppm / PPM
        if current is None and len(self._reports) >= self.max_senders:
            self.prune(now_ms)
            if len(self._reports) >= self.max_senders and not self._evict_for(key):
                return False
        self._reports[key] = ReceivedReport(key, report.epoch, issued_at_ms, row)
        return True

    def _evict_for(self, newcomer: str) -> bool:
        """Make room for ``newcomer`` unless every held sender ranks above it."""
        victim = min(
            self._reports.values(),
            key=lambda held: (self.priority(held.sender), held.issued_at_ms),
        )
        if self.priority(victim.sender) > self.priority(newcomer):
            return False
        del self._reports[victim.sender]
        return True

    def forget(self, sender: bytes | str) -> None:
        self._reports.pop(peer_key_hex(sender), None)

    def prune(self, now_ms: int) -> int:
        """Drop reports older than ``max_age_s``; returns how many."""
        stale = [
            key
            for key, held in self._reports.items()
            if now_ms - held.issued_at_ms > self.max_age_ms
        ]
        for key in stale:
            del self._reports[key]
        return len(stale)

    def reports(self) -> list[ReceivedReport]:
        return list(self._reports.values())

    def rows(self, own_row: Mapping[str, float], now_ms: int) -> dict[str, dict[str, float]]:
        """``{truster: {trustee: c}}`` of every fresh report plus ``own_row`` as our row."""
        self.prune(now_ms)
        rows = {key: dict(held.row) for key, held in self._reports.items()}
        rows[self.own_key] = {
            peer: value for peer, value in own_row.items() if peer != self.own_key
        }
        return rows
