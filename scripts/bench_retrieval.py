#!/usr/bin/env python
"""Retrieval quality of the product's ``Memory.search`` on tests/data/retrieval_v2.json.

Every memory is added through ``Memory.add`` to a fresh temp data dir (real
SQLite store with its FTS5 table, real HNSW index, the configured embedder —
MiniLM int8 by default, ``--embedder hashing`` for a quick run). Each query
then runs three ways, all through that same store and index:

* ``hybrid``: ``Memory.search`` itself (what a user gets);
* ``dense``: ``memory.index.query`` on the embedded query (HNSW only);
* ``bm25``: ``memory.store.fts(fts_query(query))`` (FTS5 only);
* ``dense2`` (when the store has a second opinion, node.memory.search.second_opinion):
  the index's 50 nearest re-scored by the second encoder, as search does before
  fusion: what the two encoders do without BM25 and the rest of the product;
* ``oracle`` (only with ``--oracle``): a headroom figure, not a method. For each
  query, the two candidate lists the product fuses (dense and BM25, 50 each) are
  fused by ``fusion.fuse`` at every fixed lexical weight 0.05, 0.10, ..., 0.95,
  the two lists themselves are the weights 0 and 1, and the best nDCG@10 *for
  that query* is kept: what a perfect choice of weight per query would reach
  with those two lists alone (the product also has clause vectors and
  re-orderings, so it can exceed it on compound questions).

Searches are made with ``record_access=False`` so that queries do not change
each other's ranking. Reported per split (tune / heldout, fixed in the data
file) and query kind: nDCG@10 (graded 2/1), recall@5, MRR, and the latency
p50/p95 of ``Memory.search`` (query embedding included). The last line is one
JSON object. The harness itself (the store, the three searches, the scores) is
tests/support/retrieval.py, shared with the retrieval tests. ``--smoke``: the
hashing embedder, no second opinion, 12 queries over the memories they judge
and the first 100 of the set, with the oracle (a few seconds).

    .venv/bin/python scripts/bench_retrieval.py [--embedder minilm|minilm-fp32|mpnet|hashing] [--split heldout]
        [--second-opinion auto|none|l3|minilm] [--oracle]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# tests/ is not an installed package: the evaluation harness is read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, print_result, quantiles, smoke

from node.memory.embedding.embedder import EMBEDDER_NAMES
from node.memory.search.second_opinion import CHOICES as SECOND_OPINIONS
from tests.support.retrieval import DATA_PATH, METHODS, Bench, evaluate, load

SMOKE_QUERIES, SMOKE_DISTRACTORS = 12, 100  # --smoke: the memories these judge, and the first 100

def print_table(report: dict[str, Any]) -> None:
    for split in sorted(report):
        print(
            f"\n== {split} ==  latency p50/p95 {report[split]['latency_ms']['p50']}/{report[split]['latency_ms']['p95']} ms"
        )
        methods = [m for m in (*METHODS, "dense2", "oracle") if m in report[split].get("overall", {})]
        print(f"{'kind':<14}{'n':>4}  " + "  ".join(f"{m + ' nDCG/R@5/MRR':>26}" for m in methods))
        for kind, entry in sorted(report[split].items()):
            if kind == "latency_ms":
                continue
            cells = "  ".join(
                f"{entry[m]['ndcg@10']:>8.3f}/{entry[m]['recall@5']:.3f}/{entry[m]['mrr']:.3f}"
                + " " * 3
                for m in methods
            )
            print(f"{kind:<14}{entry['n']:>4}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", choices=EMBEDDER_NAMES)
    parser.add_argument(
        "--split", default=None, choices=("tune", "heldout"), help="only this split"
    )
    parser.add_argument("--data", type=Path, default=DATA_PATH)
    parser.add_argument("--second-opinion", default="auto", choices=SECOND_OPINIONS,
                        help="memory.second_opinion of the store (auto: l3 for minilm, minilm for mpnet)")
    parser.add_argument(
        "--oracle", action="store_true",
        help="also report the per-query best fixed-weight fusion of the two lists (headroom, not a method)",
    )
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), embedder="hashing", second_opinion="none", oracle=True)
    memories, queries = load(arguments.data)
    if arguments.split:
        queries = [q for q in queries if q.split == arguments.split]
    if arguments.smoke:
        queries = queries[:SMOKE_QUERIES]
        judged = {memory_id for query in queries for memory_id in query.relevant}
        memories = [memory for number, memory in enumerate(memories)
                    if memory["id"] in judged or number < SMOKE_DISTRACTORS]
    with tempfile.TemporaryDirectory(prefix="crystalmesh-bench-retrieval-") as tmp:
        started = time.perf_counter()
        bench = Bench(memories, arguments.embedder, Path(tmp), arguments.second_opinion)
        second = bench.memory.second.name if bench.memory.second else None
        ingest_s = time.perf_counter() - started
        latency_s: dict[str, list[float]] = {}
        try:
            report = evaluate(bench, queries, with_oracle=arguments.oracle, latency_s=latency_s)
        finally:
            bench.close()
    for split, samples in latency_s.items():
        report[split]["latency_ms"] = quantiles([1000 * s for s in samples], (50, 95), digits=2)
    print(
        f"{len(memories)} memories ingested in {ingest_s:.1f} s with {arguments.embedder} "
        f"(second opinion: {second}); {len(queries)} queries"
    )
    print_table(report)
    print_result({
        "embedder": arguments.embedder,
        "second_opinion": second,
        "memories": len(memories),
        "queries": len(queries),
        **report,
    })


if __name__ == "__main__":
    main()
