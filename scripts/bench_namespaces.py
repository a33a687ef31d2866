#!/usr/bin/env python
"""What namespaces and versions cost ``Memory.search``, on one store, in one process.

A real data dir (hashing embedder, SQLite + HNSW) holds ``--n`` memories in the
``default`` namespace, ``--small`` memories in ``session:small`` and ``--superseded``
updates (closed versions) in ``default``. Then, with the same queries:

* **baseline**: ``Memory.search`` in ``default`` before any other namespace or
  closed version exists (the plain HNSW walk serves it);
* **big**: the same search in ``default`` after the small namespace and the
  updates were added (post-filtering only);
* **small**: a search in ``session:small`` beside the big namespace (too few of
  the plain walk's candidates qualify, so the walk is redone with hnswlib's
  filter over the namespace's rowids), with its recall@k against an exact
  search over that namespace alone;
* **all**: the search over every namespace.

The last line is one JSON object; ``*_ratio`` is p50 over the baseline p50.

    .venv/bin/python scripts/bench_namespaces.py --n 20000

``--smoke``: 500 memories, 10 in the small namespace, 50 updates, 20 queries.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _bench import add_smoke_flag, percentile, print_result, smoke

from node.config import load_config
from node.crystals.model import now_ms
from node.crystals.rows import Filters
from node.init import init_node
from node.memory import versions
from node.memory.facade import Memory, SearchRequest

WORDS = [f"w{i}" for i in range(3000)]


def texts(rng: np.random.Generator, count: int, tag: str) -> list[str]:
    return [" ".join(rng.choice(WORDS, 8)) + f" {tag}-{i}" for i in range(count)]


def timed(memory: Memory, queries: list[str], namespaces: tuple[str, ...], k: int) -> tuple[list[float], list[list[str]]]:
    latencies: list[float] = []
    found: list[list[str]] = []
    for query in queries:
        began = time.perf_counter()
        hits = memory.search(SearchRequest(query, k=k, namespaces=namespaces, record_access=False))
        latencies.append(time.perf_counter() - began)
        found.append([hit.crystal.id for hit in hits])
    return latencies, found


def p50_ms(values_s: list[float]) -> float:
    return round(1000 * percentile(values_s, 50), 3)


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench_namespaces_") as tmp:
        init_node(Path(tmp) / "node", name="bench", embedder="hashing")
        memory = Memory(load_config(Path(tmp) / "node", environ={}))
        try:
            big = texts(rng, args.n, "big")
            for start in range(0, len(big), 1000):
                memory.add_crystals([memory.prepare(text) for text in big[start:start + 1000]])
            queries = [" ".join(rng.choice(WORDS, 3)) for _ in range(args.queries)]
            baseline, _ = timed(memory, queries, ("default",), args.k)

            small_texts = texts(rng, args.small, "small")
            small = [versions.add_with_outcome(memory, {"text": text, "namespace": "session:small"})
                     .crystal for text in small_texts]
            listed = memory.store.list_crystals(
                Filters(namespaces=("default",), current_at_ms=now_ms()), limit=args.superseded)
            for crystal in listed:
                versions.update(memory, crystal.id, crystal.text + " updated")
            after_big, _ = timed(memory, queries, ("default",), args.k)
            after_small, small_found = timed(memory, queries, ("session:small",), args.k)
            after_all, _ = timed(memory, queries, (), args.k)

            vectors = memory.embed([c.text for c in small])
            hits = 0
            for query, got in zip(queries, small_found, strict=True):
                scores = vectors @ memory.embed([query])[0]
                truth = {small[i].id for i in np.argsort(-scores)[: args.k]}
                hits += len(truth & set(got))
            recall = hits / (args.k * len(queries))
        finally:
            memory.close()
    base = p50_ms(baseline)
    return {
        "n": args.n, "small": args.small, "superseded": len(listed), "queries": args.queries, "k": args.k,
        "baseline_p50_ms": base, "big_p50_ms": p50_ms(after_big), "small_p50_ms": p50_ms(after_small),
        "all_p50_ms": p50_ms(after_all), "small_recall_at_k": round(recall, 4),
        "big_ratio": round(p50_ms(after_big) / base, 2), "small_ratio": round(p50_ms(after_small) / base, 2),
        "all_ratio": round(p50_ms(after_all) / base, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="memories in the default namespace")
    parser.add_argument("--small", type=int, default=30, help="memories in session:small")
    parser.add_argument("--superseded", type=int, default=2000, help="updates in default")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=11)
    add_smoke_flag(parser)
    result = run(smoke(parser.parse_args(), n=500, small=10, superseded=50, queries=20))
    for key, value in result.items():
        print(f"{key:22} {value}")
    print_result(result)


if __name__ == "__main__":
    main()
