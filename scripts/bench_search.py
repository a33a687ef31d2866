#!/usr/bin/env python
"""HNSW search over the real crystal store + vector index vs exact numpy search.

Synthetic data: ``--n`` 384-d unit vectors drawn around ``--clusters`` random
unit centres (seeded numpy), inserted as crystals through ``CrystalStore``
(``add_many`` in batches) and ``VectorIndex.add`` — the embedder is bypassed.
The index is then saved and reopened with ``VectorIndex.open`` (as a node
restart does) and queried with the configured ``hnsw_ef_search``. Queries are
fresh points from the same distribution. Recall@10 is measured against an
exact brute-force dot product over the same matrix, in the same process, on
the same queries, one query at a time (the way a node searches). The last
line is one JSON object.

Then the whole product search, ``Memory.search`` (HNSW, FTS5 BM25, fusion,
row fetch, governance filters, exact-identifier ordering), is timed on the
same store: once with the query vector looked up (no embedding step) and
once with the real ``--embedder`` (MiniLM int8 by default) also embedding
each query text. Crystal texts are 8 synthetic words plus an ``ERR-<n>``
identifier; half the query texts name a stored identifier.

Unless ``--no-baseline``, main's search before the light rows
(``tests/support/search_baseline.py``) and ``Memory.search`` also answer every query
one after the other (which goes first alternates), on the same store and in the
same process: p50/p95 of wall and thread CPU time for each, their ratio, and
how many queries got the same top 10 ids in the same order.

``--store DIR`` keeps the built store and index there; a later run with the same
data arguments reuses them instead of building again (2 minutes at 100k).

    .venv/bin/python scripts/bench_search.py --n 100000 --store /tmp/bench_search_100k

``--smoke``: 2,000 crystals in 20 clusters, 30 queries, the hashing query embedder,
the second opinion and one ef sweep point, in a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The exact baseline is one memory-bound matrix-vector product per query; on a
# small shared VM one BLAS thread ran it faster than two (21 vs 32 ms at 100k),
# so the baseline gets one thread unless the caller says otherwise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

# tests/ is not an installed package: the frozen baseline search is read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, percentile, print_result, smoke

from node.config import MemoryConfig, NodeConfig
from node.crystals.index import IndexParams, VectorIndex
from node.crystals.model import Crystal
from node.crystals.store import CrystalStore
from node.memory.embedding.embedder import get_embedder
from node.memory.facade import Memory, SearchRequest
from tests.support.search_baseline import baseline_search

DIM = 384
K = 10
EMBEDDER_NAME = "bench-synthetic-384"
# Crystal texts: 8 words drawn from a 5,000-word synthetic vocabulary plus one
# identifier (ERR-<n>), so that the FTS5 side of the product search has real work.
VOCABULARY = [f"w{i:04d}" for i in range(5000)]


BUILT_MARKER = "bench_search_built.json"


def build_key(args: argparse.Namespace, params: IndexParams) -> dict[str, Any]:
    """What a kept store was built from: reused only by a run with the same data and index."""
    return {"n": args.n, "clusters": args.clusters, "spread": args.spread, "seed": args.seed,
            "batch": args.batch, "m": params.m, "ef_construction": params.ef_construction}


def crystal_text(rng: np.random.Generator, n: int) -> str:
    words = rng.choice(len(VOCABULARY), size=8)
    return " ".join(VOCABULARY[i] for i in words) + f" ERR-{n}"


class LookupEmbedder:
    """The bench's query vectors, looked up by query text: the product search minus the embedding.

    With ``real`` set, each call also runs that embedder on the texts (result
    discarded), so the measured search includes a real query embedding.
    """

    name = EMBEDDER_NAME
    dim = DIM

    def __init__(self, vectors: dict[str, np.ndarray], real: Any = None) -> None:
        self.vectors = vectors
        self.real = real

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.real is not None:
            self.real.embed(texts)
        return np.vstack([self.vectors[text] for text in texts])


def clustered_unit_vectors(
    rng: np.random.Generator, centres: np.ndarray, count: int, spread: float
) -> np.ndarray:
    """``count`` unit vectors, each a random centre plus isotropic Gaussian noise."""
    labels = rng.integers(0, len(centres), size=count)
    noise = rng.standard_normal((count, centres.shape[1]), dtype=np.float32)
    points = centres[labels] + noise * np.float32(spread / np.sqrt(centres.shape[1]))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def exact_top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    scores = matrix @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = MemoryConfig()
    ef_search = args.ef or config.hnsw_ef_search
    params = IndexParams(
        dim=DIM,
        m=args.m or config.hnsw_m,
        ef_construction=args.ef_construction or config.hnsw_ef_construction,
        ef_search=ef_search,
    )
    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.clusters, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = clustered_unit_vectors(rng, centres, args.n, args.spread)
    queries = clustered_unit_vectors(rng, centres, args.queries, args.spread)

    with contextlib.ExitStack() as stack:
        if args.store is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_search_")))
        else:
            root = args.store
            root.mkdir(parents=True, exist_ok=True)
        reuse = (root / BUILT_MARKER).exists()
        if reuse and json.loads((root / BUILT_MARKER).read_text()) != build_key(args, params):
            raise SystemExit(f"{root} holds a store built with other arguments; use another --store")
        store = CrystalStore(root / "crystals.db")
        store.bind_embedder(EMBEDDER_NAME, DIM)
        index = VectorIndex(root / "index.hnsw", params, EMBEDDER_NAME)
        index.open(store)

        store_s = 0.0
        index_s = 0.0
        save_s = 0.0
        rowid_of_row = np.empty(args.n, dtype=np.int64)
        if reuse:  # the store and index of an earlier run; the texts still draw from rng
            for start in range(0, args.n, args.batch):
                for offset in range(min(args.batch, args.n - start)):
                    crystal_text(rng, start + offset)
            rows = store.db.execute("SELECT rowid FROM crystals ORDER BY rowid").fetchall()
            rowid_of_row[:] = [row[0] for row in rows]
        for start in range(0, 0 if reuse else args.n, args.batch):
            chunk = vectors[start : start + args.batch]
            crystals = [
                Crystal(text=crystal_text(rng, start + offset), embedding=vector)
                for offset, vector in enumerate(chunk)
            ]
            began = time.perf_counter()
            results = store.add_many(crystals)
            stored = time.perf_counter()
            rowids = np.array([result.rowid for result in results], dtype=np.int64)
            index.add(rowids, chunk)
            index_s += time.perf_counter() - stored
            store_s += stored - began
            rowid_of_row[start : start + len(chunk)] = rowids

        if not reuse:
            began = time.perf_counter()
            index.save()
            save_s = time.perf_counter() - began
            if args.store is not None:
                (root / BUILT_MARKER).write_text(json.dumps(build_key(args, params)))
        began = time.perf_counter()
        reopened = VectorIndex(root / "index.hnsw", params, EMBEDDER_NAME)
        state = reopened.open(store)
        open_s = time.perf_counter() - began
        if state != "loaded" or reopened.count != args.n:
            raise SystemExit(f"reopened index is {state} with {reopened.count} vectors")

        for query in queries[: min(20, len(queries))]:  # warm caches for both methods
            reopened.query(query, K)
            exact_top_k(vectors, query, K)

        exact_s: list[float] = []
        truths: list[set[int]] = []
        for query in queries:
            began = time.perf_counter()
            truth = exact_top_k(vectors, query, K)
            exact_s.append(time.perf_counter() - began)
            truths.append(set(rowid_of_row[truth].tolist()))

        def measure(ef: int) -> tuple[list[float], float]:
            reopened.params.ef_search = ef
            latencies: list[float] = []
            hits = 0
            for query, truth_ids in zip(queries, truths, strict=True):
                began = time.perf_counter()
                found = reopened.query(query, K)
                latencies.append(time.perf_counter() - began)
                hits += len({rowid for rowid, _ in found} & truth_ids)
            return latencies, hits / (K * len(queries))

        hnsw_s, recall = measure(ef_search)
        sweep: list[dict[str, float]] = []
        for ef in args.sweep_ef:
            latencies, swept_recall = measure(ef)
            sweep.append(
                {"ef": ef, "recall_at_10": round(swept_recall, 4),
                 "p50_ms": round(1000 * percentile(latencies, 50), 4),
                 "p99_ms": round(1000 * percentile(latencies, 99), 4)}
            )
        reopened.params.ef_search = ef_search
        reopened.save()
        store.close()
        product = measure_product(args, root, rng, queries, params)

    p50 = 1000 * percentile(hnsw_s, 50)
    exact_p50 = 1000 * percentile(exact_s, 50)
    ingest_s = store_s + index_s
    return {
        "n": args.n,
        "dim": DIM,
        "clusters": args.clusters,
        "spread": args.spread,
        "queries": args.queries,
        "m": params.m,
        "ef_construction": params.ef_construction,
        "ef_search": ef_search,
        "batch": args.batch,
        "recall_at_10": round(recall, 4),
        "p50_ms": round(p50, 4),
        "p99_ms": round(1000 * percentile(hnsw_s, 99), 4),
        "exact_p50_ms": round(exact_p50, 4),
        "exact_p99_ms": round(1000 * percentile(exact_s, 99), 4),
        "speedup_vs_exact": round(exact_p50 / p50, 1),
        "store_s": round(store_s, 2),
        "build_s": round(index_s, 2),
        "ingest_per_s": round(args.n / ingest_s, 1) if ingest_s else None,
        "reused_store": reuse,
        "save_s": round(save_s, 3),
        "open_s": round(open_s, 3),
        "open_state": state,
        "blas_threads": os.environ["OPENBLAS_NUM_THREADS"],
        "ef_sweep": sweep,
        **product,
    }


SECOND_NAME = "bench-synthetic-second-384"


def second_opinion_lookup(memory: Memory, texts: list[str], rng: np.random.Generator) -> LookupEmbedder:
    """Random unit second-opinion vectors for every crystal lacking one (written once; kept in a
    reused --store), and a lookup of random second vectors for the query texts: what the second
    opinion adds to a search (read the candidates' vectors, re-score) minus its query embedding."""
    missing = [row[0] for row in memory.db.execute(
        "SELECT rowid FROM crystals WHERE rowid NOT IN (SELECT crystal_rowid FROM crystal_second)").fetchall()]
    with memory.db.transaction() as conn:
        for start in range(0, len(missing), 10_000):
            chunk = missing[start : start + 10_000]
            block = rng.standard_normal((len(chunk), DIM)).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            conn.executemany("INSERT INTO crystal_second(crystal_rowid, encoder, vector) VALUES (?, ?, ?)",
                             ((rowid, SECOND_NAME, vector.tobytes()) for rowid, vector in zip(chunk, block, strict=True)))
    queries = rng.standard_normal((len(texts), DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    second = LookupEmbedder(dict(zip(texts, queries, strict=True)))
    second.name = SECOND_NAME
    return second


def compare_second_opinion(config: NodeConfig, texts: list[str], vectors: dict[str, np.ndarray],
                           rng: np.random.Generator) -> dict[str, Any]:
    """``Memory.search`` without and with a second opinion, interleaved query by query (query
    vectors of both looked up): what reading the candidates' second vectors and re-scoring cost."""
    memory = Memory(config, embedder=LookupEmbedder(vectors))  # type: ignore[arg-type]
    samples: dict[str, list[float]] = {"without": [], "with": []}
    try:
        second = second_opinion_lookup(memory, texts, rng)
        for text in texts[:20]:
            for opinion in (None, second):
                memory.second = opinion  # type: ignore[assignment]
                memory.search(SearchRequest(query=text, k=K, record_access=False))
        for number, text in enumerate(texts):
            order = (("without", None), ("with", second))
            for name, opinion in order if number % 2 else order[::-1]:
                memory.second = opinion  # type: ignore[assignment]
                began = time.perf_counter()
                memory.search(SearchRequest(query=text, k=K, record_access=False))
                samples[name].append(time.perf_counter() - began)
    finally:
        memory.close()
    out = {f"second_{name}_p50_ms": round(1000 * percentile(values, 50), 3) for name, values in samples.items()}
    out |= {f"second_{name}_p95_ms": round(1000 * percentile(values, 95), 3) for name, values in samples.items()}
    out["second_ratio_p50"] = round(out["second_with_p50_ms"] / out["second_without_p50_ms"], 3)
    return out


def measure_product(
    args: argparse.Namespace, root: Path, rng: np.random.Generator, queries: np.ndarray, params: IndexParams
) -> dict[str, Any]:
    """``Memory.search`` (HNSW + FTS5 + fusion + row fetch + filters) on the store just built.

    Query texts: 3 vocabulary words, every other one also naming a stored
    identifier. Without embedding: the query vector is looked up. With
    embedding: the real ``--embedder`` also embeds each query text.
    """
    texts = []
    for i in range(len(queries)):
        words = " ".join(VOCABULARY[j] for j in rng.choice(len(VOCABULARY), size=3))
        texts.append(f"{words} ERR-{int(rng.integers(args.n))}" if i % 2 else words)
    vectors = dict(zip(texts, queries, strict=True))
    config = NodeConfig()
    config.data_dir = root
    config.memory.hnsw_m = params.m
    config.memory.hnsw_ef_construction = params.ef_construction
    config.memory.hnsw_ef_search = params.ef_search
    result: dict[str, Any] = {}
    if args.baseline:
        result |= compare_with_baseline(config, texts, vectors)
    if args.second_opinion:
        result |= compare_second_opinion(config, texts, vectors, rng)
    for label, real in (("product_no_embed", None), ("product_with_embed", args.embedder)):
        embedder = LookupEmbedder(vectors, get_embedder(real) if real else None)
        memory = Memory(config, embedder=embedder)  # type: ignore[arg-type]
        try:
            for text in texts[:20]:
                memory.search(SearchRequest(query=text, k=K, record_access=False))
            latencies = []
            for text in texts:
                began = time.perf_counter()
                memory.search(SearchRequest(query=text, k=K, record_access=False))
                latencies.append(time.perf_counter() - began)
        finally:
            memory.close()
        result[f"{label}_p50_ms"] = round(1000 * percentile(latencies, 50), 3)
        result[f"{label}_p95_ms"] = round(1000 * percentile(latencies, 95), 3)
    result["query_embedder"] = args.embedder
    return result


def compare_with_baseline(config: NodeConfig, texts: list[str], vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """``Memory.search`` and main's search before the light rows (tests/support/search_baseline.py),
    interleaved query by query on one store (which goes first alternates), query vector given.

    Wall time and the thread's CPU time (``time.thread_time``: what a busy shared
    machine steals shows in wall time, not CPU) for each, and whether both return
    the same top ``K`` ids in the same order for every query.
    """
    memory = Memory(config, embedder=LookupEmbedder(vectors))  # type: ignore[arg-type]
    samples: dict[str, tuple[list[float], list[float]]] = {"product": ([], []), "baseline": ([], [])}
    same = 0
    differing: list[str] = []

    def product(request: SearchRequest) -> list[str]:
        return [hit.crystal.id for hit in memory.search(request)]

    def baseline(request: SearchRequest) -> list[str]:
        return [hit.crystal.id for hit in baseline_search(
            memory.store, memory.index, memory.embed, memory.hormones, request, memory.learning.confidences)]

    try:
        for text in texts[:20]:
            product(SearchRequest(query=text, k=K, record_access=False))
            baseline(SearchRequest(query=text, k=K, record_access=False))
        for number, text in enumerate(texts):
            request = SearchRequest(query=text, k=K, record_access=False)
            ids: dict[str, list[str]] = {}
            order = (("product", product), ("baseline", baseline))
            for name, run_search in order if number % 2 else order[::-1]:
                began, cpu = time.perf_counter(), time.thread_time()
                ids[name] = run_search(request)
                samples[name][1].append(time.thread_time() - cpu)
                samples[name][0].append(time.perf_counter() - began)
            if ids["product"] == ids["baseline"]:
                same += 1
            elif len(differing) < 5:
                differing.append(text)
    finally:
        memory.close()
    out: dict[str, Any] = {"identical_top10": same, "compared_queries": len(texts), "differing": differing}
    for name, (wall, cpu) in samples.items():
        for kind, values in (("wall", wall), ("cpu", cpu)):
            out[f"{name}_{kind}_p50_ms"] = round(1000 * percentile(values, 50), 3)
            out[f"{name}_{kind}_p95_ms"] = round(1000 * percentile(values, 95), 3)
    for kind in ("wall", "cpu"):
        out[f"ratio_{kind}_p50"] = round(out[f"product_{kind}_p50_ms"] / out[f"baseline_{kind}_p50_ms"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="crystals to insert")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument(
        "--spread", type=float, default=1.0, help="noise norm relative to the unit centre"
    )
    parser.add_argument("--batch", type=int, default=1000, help="crystals per store transaction")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--store", type=Path, default=None,
        help="keep the built store and index in this directory, and reuse them when it holds "
             "a store built with the same arguments (default: a temporary directory)",
    )
    parser.add_argument("--ef", type=int, default=None, help="ef_search (default: config)")
    parser.add_argument("--m", type=int, default=None, help="HNSW M (default: config)")
    parser.add_argument("--ef-construction", type=int, default=None)
    parser.add_argument(
        "--sweep-ef", type=lambda text: [int(v) for v in text.split(",") if v], default=[],
        help="also measure these ef_search values on the same index, e.g. 50,200,400",
    )
    parser.add_argument(
        "--no-baseline", dest="baseline", action="store_false",
        help="skip the interleaved comparison with main's search before the light rows",
    )
    parser.add_argument(
        "--second-opinion", action="store_true",
        help="also measure Memory.search with a second opinion (node.memory.search.second_opinion) whose "
             "vectors are looked up: the cost of reading and re-scoring, without its query embedding",
    )
    parser.add_argument(
        "--embedder", default="minilm", choices=("minilm", "hashing"),
        help="embedder run on each query for the product_with_embed figure",
    )
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), n=2000, queries=30, clusters=20, batch=500, store=None,
                 sweep_ef=[50], second_opinion=True, embedder="hashing")
    result = run(args)
    rows = [
        ("vectors", f"{result['n']} x {DIM}-d, {args.clusters} clusters, spread {args.spread}"),
        ("hnsw", f"M={result['m']} ef_construction={result['ef_construction']} "
                 f"ef_search={result['ef_search']}"),
        *([("store", f"reused from {args.store} (built by an earlier run)")] if result["reused_store"] else [
            ("store insert", f"{result['store_s']} s"),
            ("index build", f"{result['build_s']} s"),
            ("ingest rate", f"{result['ingest_per_s']} crystals/s (store + index)"),
            ("save", f"{result['save_s']} s"),
        ]),
        ("reopen", f"{result['open_s']} s ({result['open_state']})"),
        ("recall@10", f"{result['recall_at_10']}"),
        ("hnsw p50 / p99", f"{result['p50_ms']} / {result['p99_ms']} ms"),
        ("exact p50 / p99", f"{result['exact_p50_ms']} / {result['exact_p99_ms']} ms"),
        ("speedup (p50)", f"{result['speedup_vs_exact']}x"),
        ("Memory.search p50 / p95", f"{result['product_no_embed_p50_ms']} / "
                                    f"{result['product_no_embed_p95_ms']} ms (query vector given)"),
        *([("second opinion, interleaved", f"without p50 / p95 {result['second_without_p50_ms']} / "
                                              f"{result['second_without_p95_ms']} ms, with "
                                              f"{result['second_with_p50_ms']} / {result['second_with_p95_ms']} ms "
                                              f"(ratio {result['second_ratio_p50']}; query vectors given)")]
          if args.second_opinion else []),
        ("  + query embedding", f"{result['product_with_embed_p50_ms']} / "
                                f"{result['product_with_embed_p95_ms']} ms ({result['query_embedder']})"),
    ]
    if args.baseline:
        for name in ("product", "baseline"):
            rows.append((f"interleaved {name}", " ".join(
                f"{kind} p50 / p95 {result[f'{name}_{kind}_p50_ms']} / {result[f'{name}_{kind}_p95_ms']} ms"
                for kind in ("wall", "cpu"))))
        rows.append(("ratio to baseline (p50)", f"wall {result['ratio_wall_p50']}, cpu {result['ratio_cpu_p50']}"))
        rows.append(("identical top 10", f"{result['identical_top10']} of {result['compared_queries']} queries"))
    for point in result["ef_sweep"]:
        rows.append(
            (f"ef={point['ef']}", f"recall@10 {point['recall_at_10']}, "
             f"p50 {point['p50_ms']} ms, p99 {point['p99_ms']} ms")
        )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print_result(result)


if __name__ == "__main__":
    main()
