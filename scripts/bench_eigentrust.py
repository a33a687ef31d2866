#!/usr/bin/env python
"""EigenTrust on a random trust graph: sparse numpy vs pure Python vs dense numpy.

Builds ``--peers`` peers with ``--edges`` random positive local-trust edges
(seeded), ``--pretrusted`` of them pre-trusted, and times
:func:`node.trust.eigentrust.eigentrust` (median of ``--repeats`` runs) against
a pure-Python power iteration on the same graph, and against a dense-matrix
numpy iteration (matrix built outside the timing) on a ``--small-peers`` graph of the same average degree. The
results of each pair are checked to agree. The last line is one JSON object.

    .venv/bin/python scripts/bench_eigentrust.py [--peers 10000] [--edges 200000] [--smoke]

``--smoke``: 300 peers, 3,000 edges, 100 in the dense run, 2 repeats.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Collection
from typing import TypeVar

import numpy as np
from _bench import add_smoke_flag, percentile, print_result, smoke

from node.trust.eigentrust import (
    TrustMatrix,
    eigentrust,
    normalise_local_trust,
)

ALPHA = 0.15
EPSILON = 1e-6
MAX_ITERATIONS = 100
T = TypeVar("T")


def random_rows(peers: int, edges: int, seed: int) -> tuple[dict[str, dict[str, float]], list[str]]:
    rng = np.random.default_rng(seed)
    names = [f"peer-{i:05d}" for i in range(peers)]
    src = rng.integers(0, peers, edges)
    dst = rng.integers(0, peers, edges)
    weight = rng.integers(1, 20, edges)
    rows: dict[str, dict[str, float]] = {}
    for i, j, w in zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True):
        row = rows.setdefault(names[i], {})
        row[names[j]] = row.get(names[j], 0.0) + float(w)
    return rows, names


def python_eigentrust(
    rows: dict[str, dict[str, float]], peers: list[str], pretrusted: Collection[str]
) -> tuple[dict[str, float], int]:
    """The same iteration, written with dicts and loops: the baseline."""
    normalised = {
        truster: normalise_local_trust({k: v for k, v in row.items() if k != truster})
        for truster, row in rows.items()
    }
    pre = {peer: (1.0 / len(pretrusted) if peer in pretrusted else 0.0) for peer in peers}
    trust = dict(pre)
    iterations = 0
    while iterations < MAX_ITERATIONS:
        iterations += 1
        spread = dict.fromkeys(peers, 0.0)
        dangling = 0.0
        for truster in peers:
            row = normalised.get(truster)
            if not row:
                dangling += trust[truster]
                continue
            mass = trust[truster]
            for trustee, share in row.items():
                spread[trustee] += share * mass
        new = {
            peer: (1 - ALPHA) * (spread[peer] + dangling * pre[peer]) + ALPHA * pre[peer]
            for peer in peers
        }
        delta = sum(abs(new[peer] - trust[peer]) for peer in peers)
        trust = new
        if delta < EPSILON:
            break
    return trust, iterations


def dense_matrices(matrix: TrustMatrix, pretrusted_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Dense C (n × n, rows without trust replaced by p) and p: the other baseline."""
    n = len(matrix.peers)
    keep = matrix.src != matrix.dst
    c = np.zeros((n, n))
    np.add.at(c, (matrix.src[keep], matrix.dst[keep]), matrix.weight[keep])
    pre = np.zeros(n)
    pre[pretrusted_ids] = 1.0 / len(pretrusted_ids)
    sums = c.sum(axis=1)
    c[sums > 0] /= sums[sums > 0, None]
    c[sums <= 0] = pre
    return c, pre


def dense_eigentrust(c: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """The iteration as dense matrix-vector products (construction not timed)."""
    t = pre.copy()
    for _ in range(MAX_ITERATIONS):
        new = (1 - ALPHA) * (c.T @ t) + ALPHA * pre
        delta = np.abs(new - t).sum()
        t = new
        if delta < EPSILON:
            break
    return t


def timed_ms(function: Callable[[], T], repeats: int) -> tuple[float, T]:
    """Median wall time in ms over ``repeats`` calls, and the last result."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 50), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--pretrusted", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small-peers", type=int, default=2_000, help="size of the dense run")
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), peers=300, edges=3_000, repeats=2, small_peers=100)

    rows, names = random_rows(arguments.peers, arguments.edges, arguments.seed)
    pretrusted = set(names[: arguments.pretrusted])

    build_ms, matrix = timed_ms(lambda: TrustMatrix.from_rows(rows), 1)
    run_ms, result = timed_ms(lambda: eigentrust(matrix, pretrusted), arguments.repeats)
    python_ms, (python_trust, python_iterations) = timed_ms(
        lambda: python_eigentrust(rows, names, pretrusted), 1
    )
    python_gap = max(abs(result.trust[p] - python_trust[p]) for p in names)

    small_edges = arguments.edges * arguments.small_peers // arguments.peers
    small_rows, small_names = random_rows(arguments.small_peers, small_edges, arguments.seed)
    small = TrustMatrix.from_rows(small_rows)
    small_pre = {small_names[i] for i in range(arguments.pretrusted)}
    sparse_small_ms, small_result = timed_ms(
        lambda: eigentrust(small, small_pre), arguments.repeats
    )
    pre_ids = [small.peers.index(p) for p in sorted(small_pre)]
    dense_c, dense_pre = dense_matrices(small, pre_ids)
    dense_small_ms, dense_t = timed_ms(
        lambda: dense_eigentrust(dense_c, dense_pre), arguments.repeats
    )
    dense_gap = max(
        abs(small_result.trust[p] - float(dense_t[i])) for i, p in enumerate(small.peers)
    )

    print(
        f"{arguments.peers} peers, {len(matrix.src)} distinct edges "
        f"({arguments.edges} drawn), {len(pretrusted)} pre-trusted, seed {arguments.seed}"
    )
    print(f"  build TrustMatrix from rows   {build_ms:9.1f} ms")
    print(
        f"  eigentrust (sparse numpy)     {run_ms:9.1f} ms  "
        f"{result.iterations} iterations, converged={result.converged}"
    )
    print(
        f"  pure-Python power iteration   {python_ms:9.1f} ms  "
        f"{python_iterations} iterations, max |Δt| {python_gap:.1e}, "
        f"sparse is {python_ms / run_ms:.0f}x faster"
    )
    print(
        f"{arguments.small_peers} peers, {len(small.src)} edges: sparse {sparse_small_ms:.1f} ms, "
        f"dense numpy {dense_small_ms:.1f} ms (max |Δt| {dense_gap:.1e}), "
        f"sparse is {dense_small_ms / sparse_small_ms:.0f}x faster"
    )
    print_result({
        "peers": arguments.peers,
        "edges": len(matrix.src),
        "iterations": result.iterations,
        "converged": result.converged,
        "ms": round(run_ms, 2),
        "build_ms": round(build_ms, 2),
        "python_ms": round(python_ms, 1),
        "speedup_vs_python": round(python_ms / run_ms, 1),
        "small_peers": arguments.small_peers,
        "small_sparse_ms": round(sparse_small_ms, 2),
        "small_dense_ms": round(dense_small_ms, 2),
    })


if __name__ == "__main__":
    main()
