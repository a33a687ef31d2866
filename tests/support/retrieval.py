"""The retrieval evaluation harness: a judged memory set in a real store, searched three ways.

Every memory of a set (tests/data/retrieval_*.json) is added through
``Memory.add_crystals`` to a real data dir (SQLite + FTS5, HNSW, the chosen
embedder). Each query then runs through the same store and index as

* ``hybrid``: ``Memory.search`` itself (what a user gets);
* ``dense``: ``memory.index.query`` on the embedded query (HNSW only);
* ``bm25``: ``memory.store.fts(fts_query(query))`` (FTS5 only);
* ``dense2`` (when the store has a second opinion): the index's 50 nearest
  re-scored by the second encoder, as search does before fusion;
* ``oracle`` (asked for): the per-query best of the two lists fused at fixed
  lexical weights, a headroom figure, not a method.

Searches are made with ``record_access=False`` so that queries do not change
each other's ranking. Shared by scripts/bench_retrieval.py (the figures of
docs/benchmarks.md), scripts/bench_long_memories.py and the retrieval tests.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.config import NodeConfig
from node.memory.embedding.embedder import get_embedder
from node.memory.facade import Memory, SearchRequest
from node.memory.search.fusion import FusionParams, fts_query, fuse
from node.memory.search.second_opinion import opinion_of

DATA_PATH = Path(__file__).resolve().parents[1] / "data" / "retrieval_v2.json"
CUTOFF = 10
METHODS = ("hybrid", "dense", "bm25")
ORACLE_DEPTH = 50  # what Memory.search fuses for k=10: max(50, 5k) candidates per list
ORACLE_WEIGHTS = tuple(step / 20 for step in range(1, 20))  # the ends are the two lists themselves


@dataclass(frozen=True)
class Query:
    id: str
    kind: str
    split: str
    text: str
    relevant: dict[str, int]


def load(path: Path = DATA_PATH) -> tuple[list[dict[str, str]], list[Query]]:
    data = json.loads(path.read_text())
    queries = [
        Query(
            q["id"], q["kind"], q["split"], q["text"], {k: int(v) for k, v in q["relevant"].items()}
        )
        for q in data["queries"]
    ]
    return data["memories"], queries


def ndcg(ranked: list[str], relevant: dict[str, int], cutoff: int = CUTOFF) -> float:
    gain = sum(
        (2 ** relevant.get(doc, 0) - 1) / math.log2(i + 2) for i, doc in enumerate(ranked[:cutoff])
    )
    ideal = sorted(relevant.values(), reverse=True)[:cutoff]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return gain / best if best else 0.0


def recall(ranked: list[str], relevant: dict[str, int], cutoff: int = 5) -> float:
    return len(set(ranked[:cutoff]) & set(relevant)) / len(relevant)


def reciprocal_rank(ranked: list[str], relevant: dict[str, int]) -> float:
    for i, doc in enumerate(ranked):
        if doc in relevant:
            return 1.0 / (i + 1)
    return 0.0


class Bench:
    """One temp data dir holding the whole memory set, searched the product's way."""

    def __init__(self, memories: list[dict[str, str]], embedder_name: str, data_dir: Path,
                 second_opinion: str = "auto") -> None:
        config = NodeConfig()
        config.data_dir = data_dir
        config.memory.embedder = embedder_name
        config.memory.second_opinion = second_opinion
        self.memory = Memory(config, embedder=get_embedder(embedder_name))
        self.by_rowid: dict[int, str] = {}
        self.by_crystal: dict[str, str] = {}
        crystals = [self.memory.prepare(m["text"]) for m in memories]
        results = self.memory.add_crystals(crystals)
        for memory, result in zip(memories, results, strict=True):
            self.by_rowid[result.rowid] = memory["id"]
            self.by_crystal[result.id] = memory["id"]

    def close(self) -> None:
        self.memory.close()

    def hybrid(self, text: str, k: int = CUTOFF) -> list[str]:
        hits = self.memory.search(SearchRequest(query=text, k=k, record_access=False))
        return [self.by_crystal[hit.crystal.id] for hit in hits]

    def dense(self, text: str, k: int = CUTOFF) -> list[str]:
        vector = self.memory.embed([text])[0]
        return [self.by_rowid[rowid] for rowid, _ in self.memory.index.query(vector, k)]

    def dense2(self, text: str, k: int = CUTOFF) -> list[str]:
        """The index's nearest ``ORACLE_DEPTH`` re-scored by the second opinion, as search does."""
        dense = self.memory.index.query(self.memory.embed([text])[0], ORACLE_DEPTH)
        dense = opinion_of(self.memory.db, self.memory.second, text, dense)
        return [self.by_rowid[rowid] for rowid, _ in dense[:k]]

    def bm25(self, text: str, k: int = CUTOFF) -> list[str]:
        return [self.by_rowid[rowid] for rowid, _ in self.memory.store.fts(fts_query(text), k)]

    def fused_at(self, text: str, weights: tuple[float, ...] = ORACLE_WEIGHTS,
                 k: int = CUTOFF) -> list[list[str]]:
        """The dense and BM25 rankings, then both candidate lists fused at each of ``weights`` (see ``oracle``)."""
        vector = self.memory.embed([text])[0]
        dense = [(str(rowid), score) for rowid, score in self.memory.index.query(vector, ORACLE_DEPTH)]
        match = fts_query(text)
        lexical = [(str(rowid), score) for rowid, score in self.memory.store.fts(match, ORACLE_DEPTH)] if match else []
        rankings = [self.dense(text, k), self.bm25(text, k)]
        for weight in weights:
            params = FusionParams(base_lexical_weight=weight, confidence_weight=0.0, identifier_weight=0.0,
                                  max_lexical_weight=1.0, confidence_floor=0.0)
            fused = fuse(text, dense, lexical, k, params=params)
            rankings.append([self.by_rowid[int(rowid)] for rowid, _ in fused])
        return rankings


def oracle(bench: Bench, query: Query) -> tuple[float, float, float]:
    """The best (nDCG@10, recall@5, MRR) over the fixed-weight fusions, each maximised on its own."""
    rankings = bench.fused_at(query.text)
    return (
        max(ndcg(ranked, query.relevant) for ranked in rankings),
        max(recall(ranked, query.relevant) for ranked in rankings),
        max(reciprocal_rank(ranked, query.relevant) for ranked in rankings),
    )


def evaluate(bench: Bench, queries: list[Query], with_oracle: bool = False,
             latency_s: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """nDCG@10, recall@5 and MRR per split ("tune", "heldout", "all"), kind and method.

    ``latency_s``, when given, receives the seconds each ``Memory.search`` took, per split.
    """
    scores: dict[tuple[str, str, str], list[tuple[float, float, float]]] = defaultdict(list)
    latency: dict[str, list[float]] = {} if latency_s is None else latency_s
    for query in queries:
        results: dict[str, tuple[float, float, float]] = {}
        for method in (*METHODS, "dense2") if bench.memory.second is not None else METHODS:
            started = time.perf_counter()
            ranked = getattr(bench, method)(query.text)
            elapsed = time.perf_counter() - started
            if method == "hybrid":
                latency.setdefault(query.split, []).append(elapsed)
            results[method] = (
                ndcg(ranked, query.relevant),
                recall(ranked, query.relevant),
                reciprocal_rank(ranked, query.relevant),
            )
        if with_oracle:
            results["oracle"] = oracle(bench, query)
        for method, triple in results.items():
            for kind in (query.kind, "overall"):
                scores[(query.split, kind, method)].append(triple)
                scores[("all", kind, method)].append(triple)
        latency.setdefault("all", []).append(latency[query.split][-1])
    report: dict[str, Any] = {}
    for (split, kind, method), rows in sorted(scores.items()):
        entry = report.setdefault(split, {}).setdefault(kind, {"n": len(rows)})
        entry[method] = {
            "ndcg@10": round(sum(r[0] for r in rows) / len(rows), 4),
            "recall@5": round(sum(r[1] for r in rows) / len(rows), 4),
            "mrr": round(sum(r[2] for r in rows) / len(rows), 4),
        }
    return report
