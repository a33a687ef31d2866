"""Replay protection for signed envelopes: which (sender, seq) pairs were already accepted.

Shared by gossip validation (``node.net.rules.validation``) and the request/response
transport (``node.net.reqresp``).
"""

from __future__ import annotations

from collections import OrderedDict


class ReplayGuard:
    """Per-sender replay filter over envelope sequence numbers.

    Gossip does not preserve order between paths, so a plain "seq must exceed
    the last one seen" rule would drop honest messages that overtook each
    other. Each sender keeps a *floor* and the set of the last
    ``reorder_window`` accepted seqs above it: a seq is new when it is above
    the floor and not in the set. When the set overflows, its smallest entry
    becomes the floor, so anything older than the last ``reorder_window``
    messages of a sender is rejected.

    Memory is bounded: at most ``max_senders`` senders are tracked, least
    recently heard first out. An evicted sender's old messages are still
    rejected by the clock window (``issued_at`` older than ``clock_window_s``).
    """

    def __init__(self, reorder_window: int = 64, max_senders: int = 4096) -> None:
        self.reorder_window = reorder_window
        self.max_senders = max_senders
        self._senders: OrderedDict[bytes, tuple[int, set[int]]] = OrderedDict()

    def is_new(self, sender: bytes, seq: int) -> bool:
        state = self._senders.get(sender)
        if state is None:
            return True
        floor, recent = state
        return seq > floor and seq not in recent

    def commit(self, sender: bytes, seq: int) -> None:
        state = self._senders.get(sender)
        if state is None:
            floor, recent = -1, set[int]()
            if len(self._senders) >= self.max_senders:
                self._senders.popitem(last=False)
        else:
            floor, recent = state
            self._senders.move_to_end(sender)
        recent.add(seq)
        if len(recent) > self.reorder_window:
            oldest = min(recent)
            recent.discard(oldest)
            floor = max(floor, oldest)
        self._senders[sender] = (floor, recent)

    def high_water(self, sender: bytes) -> int | None:
        state = self._senders.get(sender)
        if state is None:
            return None
        floor, recent = state
        return max(recent, default=floor)

    def __len__(self) -> int:
        return len(self._senders)
