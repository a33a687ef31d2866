"""EigenTrust global trust (Kamvar, Schlosser, Garcia-Molina 2003).

Local trust ``s_ij`` (what peer i thinks of j, from interactions) is normalised
per row, ``c_ij = max(s_ij, 0) / Σ_j max(s_ij, 0)``, and global trust is the
fixed point of ``t ← (1 − a)·Cᵀt + a·p`` where ``p`` is uniform over the
pre-trusted peers (management nodes). Rows with no positive trust fall back to
``p``. The pre-trust term is what defeats Sybil clusters: a clique that only
trusts itself receives no mass unless an honest peer trusts into it.

The matrix is sparse (edge arrays, one ``np.bincount`` per iteration), so 10k
peers / 200k edges take a few milliseconds per iteration.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from node.config import TrustConfig

DEFAULT_ALPHA = TrustConfig.alpha
DEFAULT_EPSILON = TrustConfig.epsilon
DEFAULT_MAX_ITERATIONS = TrustConfig.max_iterations


def normalise_local_trust(s_row: Mapping[str, float]) -> dict[str, float]:
    """One row of the normalised local trust matrix.

    EigenTrust: ``c_ij = max(s_ij, 0) / Σ_j max(s_ij, 0)``. A row with no positive
    entry is ``{}`` (the peer trusts nobody; EigenTrust then uses ``p`` for it).
    """
    positive = {peer: value for peer, value in s_row.items() if value > 0}
    total = sum(positive.values())
    if total <= 0:
        return {}
    return {peer: value / total for peer, value in positive.items()}


@dataclass(frozen=True)
class TrustMatrix:
    """Sparse local trust: edge ``k`` is ``peers[src[k]]`` trusting ``peers[dst[k]]``
    with raw weight ``weight[k]``. Non-positive weights and self-trust are ignored."""

    peers: list[str]
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    weight: NDArray[np.float64]

    @classmethod
    def from_rows(
        cls, rows: Mapping[str, Mapping[str, float]], extra_peers: Iterable[str] = ()
    ) -> TrustMatrix:
        """From ``{truster: {trustee: s_ij}}``; peer order is sorted for determinism."""
        names = set(extra_peers) | set(rows)
        for row in rows.values():
            names.update(row)
        peers = sorted(names)
        index = {peer: i for i, peer in enumerate(peers)}
        src: list[int] = []
        dst: list[int] = []
        weight: list[float] = []
        for truster, row in rows.items():
            for trustee, value in row.items():
                src.append(index[truster])
                dst.append(index[trustee])
                weight.append(float(value))
        return cls(
            peers,
            np.asarray(src, dtype=np.int64),
            np.asarray(dst, dtype=np.int64),
            np.asarray(weight, dtype=np.float64),
        )


@dataclass(frozen=True)
class EigenTrustResult:
    trust: dict[str, float]
    iterations: int
    converged: bool


def eigentrust(
    matrix: Mapping[str, Mapping[str, float]] | TrustMatrix,
    pretrusted: Collection[str] = frozenset(),
    alpha: float = DEFAULT_ALPHA,
    epsilon: float = DEFAULT_EPSILON,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> EigenTrustResult:
    """Global trust of every peer in ``matrix`` (and every pre-trusted peer); sums to 1.

    EigenTrust (Kamvar et al. 2003, algorithm 3): ``t ← (1 − a)·Cᵀt + a·p``,
    starting from ``t = p`` and stopping when ``‖t_new − t‖₁ < epsilon`` or after
    ``max_iterations``. ``p`` is uniform over ``pretrusted`` (uniform over all
    peers if none); rows of ``C`` without positive trust are replaced by ``p``.
    Raw rows are normalised here (already-normalised rows are unchanged by it).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError("alpha must be in [0, 1]")
    if isinstance(matrix, TrustMatrix):
        graph = matrix
        known = set(graph.peers)
        missing = sorted(set(pretrusted) - known)
        if missing:
            graph = TrustMatrix(graph.peers + missing, graph.src, graph.dst, graph.weight)
    else:
        graph = TrustMatrix.from_rows(matrix, extra_peers=pretrusted)
    n = len(graph.peers)
    if n == 0:
        return EigenTrustResult({}, 0, True)

    index = {peer: i for i, peer in enumerate(graph.peers)}
    pre = np.zeros(n)
    pre_ids = [index[peer] for peer in pretrusted if peer in index]
    if pre_ids:
        pre[pre_ids] = 1.0 / len(pre_ids)
    else:
        pre[:] = 1.0 / n

    keep = (graph.weight > 0) & (graph.src != graph.dst)
    src, dst, weight = graph.src[keep], graph.dst[keep], graph.weight[keep]
    row_sum = np.bincount(src, weights=weight, minlength=n)
    c = weight / row_sum[src]
    dangling = row_sum <= 0

    t = pre.copy()
    converged = False
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        # astype: bincount of an empty edge list returns integers
        spread = np.bincount(dst, weights=c * t[src], minlength=n).astype(np.float64, copy=False)
        spread += t[dangling].sum() * pre
        t_new = (1 - alpha) * spread + alpha * pre
        delta = float(np.abs(t_new - t).sum())
        t = t_new
        if delta < epsilon:
            converged = True
            break
    total = t.sum()
    if total > 0:
        t = t / total
    return EigenTrustResult(dict(zip(graph.peers, t.tolist(), strict=True)), iterations, converged)
