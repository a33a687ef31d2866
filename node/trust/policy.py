"""From evidence to a trust level: when is a peer *untrusted* rather than merely unproven?

``levels.reputation`` scores a peer relative to the average one, so a score
below ``untrusted_below`` (0.3) only says "holds less than 0.43× the average
trust share". For an honest seller that simply has not sold much yet that is
a lack of evidence, not evidence of harm, and calling it untrusted starves it
(nobody buys from an untrusted seller, so it never earns trust). The Sybil
simulation showed exactly that. So a low score demotes a peer below
provisional only together with *negative* evidence:

- our own experience is net negative (``s_ij ≤ 0`` with weighted events), or
- the network's experience is: reports carry ``c_ij = 0`` entries for peers
  their sender has dealt with and distrusts, and the trust-weighted vote of
  everyone who reported on the peer is against it,
  ``distrust_j = Σ_i t_i·[c_ij = 0] > vouch_j = Σ_i t_i·[c_ij > 0]``,
  and we have no good experience of our own.

Praise from peers without global trust weighs nothing either way, so a
clique that praises itself earns nothing and cannot outvote honest buyers it
poisoned; nor can it defame honest peers. Otherwise a peer with some evidence
is at least provisional, and ``levels.level_for`` places it by score above that.

The relative score has the mirror problem at the top: an honest seller that
holds an average share scores 0.5 however well it has served us, so it would
never be *trusted* (and weather, which admits only trusted peers, would shut
out every honest seller). So a record of our own counts absolutely too: a peer
whose satisfactory weight with us is at least ``TRUSTED_RECORD`` (two good
trades at the default event weights: delivered + worked, +2 each) and with no
negative evidence at all (no unsatisfactory event, no offence, not outvoted by
the network) is at least *trusted*. A single failed or tampered delivery
removes the promotion at once; the clique cannot earn it by praising itself,
because the record is our own trades, not what others report.
"""

from __future__ import annotations

from node.trust.levels import DEFAULT_THRESHOLDS, TrustLevel, level_for, reputation

TRUSTED_RECORD = 4.0
"""Satisfactory weight of our own (two good trades) that makes a clean peer trusted."""


def assess(
    local: float | None,
    local_raw: float | None,
    global_: float | None,
    n_peers: int,
    local_peers: int,
    *,
    vouch: float = 0.0,
    distrust: float = 0.0,
    is_management: bool = False,
    banned: bool = False,
    thresholds: tuple[float, float, float] = DEFAULT_THRESHOLDS,
    satisfactory: float = 0.0,
    unsatisfactory: float = 0.0,
    offences: int = 0,
    trusted_record: float = TRUSTED_RECORD,
) -> tuple[float, TrustLevel]:
    """``(reputation, level)`` of one peer.

    ``local`` is our ``c_ij`` (None without weighted events), ``local_raw`` our
    ``s_ij`` (None likewise), ``global_`` its EigenTrust ``t_j`` (None when no
    report vouches for it), ``n_peers`` the size of the EigenTrust result,
    ``local_peers`` the length of our normalised row, ``vouch`` / ``distrust``
    the global trust of the other reporters with a positive / zero entry for it,
    ``satisfactory`` / ``unsatisfactory`` / ``offences`` our own record of it.
    """
    positive_local = local_raw is not None and local_raw > 0
    negative_local = local_raw is not None and local_raw <= 0
    outvoted = distrust > vouch and not positive_local
    score = reputation(local, global_, n_peers, local_peers=max(1, local_peers))
    if outvoted:
        score = min(score, thresholds[0] / 2)
    clean_record = (
        satisfactory >= trusted_record and unsatisfactory <= 0 and offences == 0 and not outvoted
    )
    if clean_record:
        score = max(score, thresholds[1])
    level = level_for(
        score,
        is_management=is_management,
        banned=banned,
        thresholds=thresholds,
        has_evidence=local is not None or global_ is not None or distrust > 0,
    )
    if level is not TrustLevel.UNTRUSTED:
        return score, level
    if negative_local or outvoted:
        return score, TrustLevel.UNTRUSTED
    return score, TrustLevel.PROVISIONAL
