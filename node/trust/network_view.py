"""What the network's trust reports say about each peer, once EigenTrust has run.

Global trust ``t_j`` alone, plus the evidence the level policy weighs beside it: how much
trust-weighted vouching and distrust each peer received, and whether anyone outside the
pre-trusted set holds enough global trust for ``t_j`` to say anything at all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

MIN_TRUST_FLOW = 0.01
"""Global trust outside the pre-trusted peers below which EigenTrust is uninformative."""


@dataclass(frozen=True)
class NetworkView:
    trust: Mapping[str, float] = field(default_factory=dict)
    """EigenTrust's global trust per hex key."""
    incoming: frozenset[str] = frozenset()
    """Peers some other reporter trusts (a positive entry in someone else's row)."""
    informative: bool = False
    vouch: Mapping[str, float] = field(default_factory=dict)
    distrust: Mapping[str, float] = field(default_factory=dict)

    def global_trust(self, key: str) -> float | None:
        """``t_j`` if it says anything about ``key``, else None."""
        return self.trust.get(key) if self.informative and key in self.incoming else None


def network_view(rows: Mapping[str, Mapping[str, float]], trust: Mapping[str, float],
                 own_key: str, pretrusted: Collection[str]) -> NetworkView:
    """Tally each reporter's row, weighted by the reporter's global trust (our own row is
    the local term, not network evidence; a reporter's entry about itself is ignored)."""
    vouch: dict[str, float] = {}
    distrust: dict[str, float] = {}
    for sender, row in rows.items():
        if sender == own_key:
            continue
        weight = trust.get(sender, 0.0)
        for peer, value in row.items():
            if peer == sender:
                continue
            tally = vouch if value > 0 else distrust
            tally[peer] = tally.get(peer, 0.0) + weight
    incoming = frozenset(
        peer for sender, row in rows.items() for peer, value in row.items()
        if value > 0 and peer != sender
    )
    # If the pre-trusted peers trust nobody, all mass stays with them and t_j = 0
    # says nothing about anyone else: then global trust is not used at all.
    flow = sum(value for peer, value in trust.items() if peer not in pretrusted)
    return NetworkView(dict(trust), incoming, flow >= MIN_TRUST_FLOW, vouch, distrust)
