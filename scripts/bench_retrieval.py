#!/usr/bin/env python
"""nDCG@10 of dense, BM25, plain RRF and crystalmesh's hybrid fusion on tests/data/retrieval_set.json.

Dense: exact cosine search over MiniLM (int8) vectors. Lexical: an in-memory
SQLite FTS5 table (``porter unicode61``) queried with
:func:`node.crystals.fusion.fts_query` and ranked by ``bm25()``. Each method
sees the top ``--candidates`` of each list. Reported per split (tune /
heldout) and query kind (paraphrase / identifier). ``--tune`` grid-searches
:class:`FusionParams` on the tune split only. The last line is one JSON object.

    .venv/bin/python scripts/bench_retrieval.py [--embedder minilm|hashing] [--tune]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.crystals.fusion import DEFAULT_PARAMS, FusionParams, fts_query, fuse, rrf
from node.memory.embedder import Embedder, get_embedder

DATA_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval_set.json"
CUTOFF = 10
METHODS = ("dense", "bm25", "rrf", "hybrid")
Ranking = list[tuple[str, float]]


@dataclass(frozen=True)
class Query:
    id: str
    kind: str
    split: str
    text: str
    relevant: dict[str, int]


class RetrievalIndex:
    """The two searches a crystalmesh store runs, over an in-memory corpus."""

    def __init__(self, memories: list[dict[str, str]], embedder: Embedder) -> None:
        self.ids = [memory["id"] for memory in memories]
        self.embedder = embedder
        self.vectors = embedder.embed([memory["text"] for memory in memories])
        self.connection = sqlite3.connect(":memory:")
        self.connection.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5(id UNINDEXED, text, tokenize='porter unicode61')"
        )
        self.connection.executemany(
            "INSERT INTO memories_fts (id, text) VALUES (?, ?)",
            [(memory["id"], memory["text"]) for memory in memories],
        )
        self._doc_freq_cache: dict[str, float] = {}

    def dense(self, query_vector: np.ndarray, limit: int) -> Ranking:
        similarities = self.vectors @ query_vector
        order = np.argsort(-similarities)[:limit]
        return [(self.ids[index], float(similarities[index])) for index in order]

    def lexical(self, text: str, limit: int) -> Ranking:
        expression = fts_query(text)
        if not expression:
            return []
        rows = self.connection.execute(
            "SELECT id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY score LIMIT ?",
            (expression, limit),
        ).fetchall()
        return [(doc_id, float(score)) for doc_id, score in rows]

    def doc_freq(self, token: str) -> float:
        """Fraction of memories matching ``token`` (the way the store should compute it)."""
        if token not in self._doc_freq_cache:
            expression = fts_query(token)
            count = 0
            if expression:
                (count,) = self.connection.execute(
                    "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (expression,)
                ).fetchone()
            self._doc_freq_cache[token] = count / len(self.ids)
        return self._doc_freq_cache[token]


def ndcg(ranked_ids: list[str], relevant: dict[str, int], cutoff: int = CUTOFF) -> float:
    gains = [(2 ** relevant.get(doc_id, 0) - 1) / math.log2(rank + 2) for rank, doc_id in enumerate(ranked_ids[:cutoff])]
    ideal_grades = sorted(relevant.values(), reverse=True)[:cutoff]
    ideal = sum((2**grade - 1) / math.log2(rank + 2) for rank, grade in enumerate(ideal_grades))
    return sum(gains) / ideal if ideal > 0 else 0.0


@dataclass
class Candidates:
    query: Query
    dense: Ranking
    lexical: Ranking


def load_queries(data: dict) -> list[Query]:
    return [Query(**query) for query in data["queries"]]


def gather(index: RetrievalIndex, queries: list[Query], candidates: int) -> list[Candidates]:
    query_vectors = index.embedder.embed([query.text for query in queries])
    return [
        Candidates(query, index.dense(vector, candidates), index.lexical(query.text, candidates))
        for query, vector in zip(queries, query_vectors, strict=True)
    ]


def rank(method: str, item: Candidates, doc_freq: Callable[[str], float], params: FusionParams) -> list[str]:
    if method == "dense":
        return [doc_id for doc_id, _ in item.dense]
    if method == "bm25":
        return [doc_id for doc_id, _ in item.lexical]
    if method == "rrf":
        scores = rrf([[doc_id for doc_id, _ in item.dense], [doc_id for doc_id, _ in item.lexical]])
        return sorted(scores, key=lambda doc_id: scores[doc_id], reverse=True)
    return [doc_id for doc_id, _ in fuse(item.query.text, item.dense, item.lexical, CUTOFF, doc_freq=doc_freq, params=params)]


def evaluate(
    items: list[Candidates], doc_freq: Callable[[str], float], params: FusionParams = DEFAULT_PARAMS
) -> dict[str, dict[str, dict[str, float]]]:
    """``{split: {kind: {method: mean nDCG@10}}}`` with kind ``"all"`` for every query of the split."""
    results: dict[str, dict[str, dict[str, float]]] = {}
    for split in ("tune", "heldout"):
        if not any(item.query.split == split for item in items):
            continue
        results[split] = {}
        for kind in ("all", "paraphrase", "identifier"):
            chosen = [item for item in items if item.query.split == split and kind in ("all", item.query.kind)]
            if not chosen:
                continue
            results[split][kind] = {
                method: round(
                    sum(ndcg(rank(method, item, doc_freq, params), item.query.relevant) for item in chosen) / len(chosen), 4
                )
                for method in METHODS
            }
            results[split][kind]["queries"] = len(chosen)
    return results


def tune(items: list[Candidates], doc_freq: Callable[[str], float]) -> FusionParams:
    """Grid search on the tune split.

    Objective: the worst per-kind margin over the best single method for that
    kind (paraphrase vs dense, identifier vs BM25), then overall nDCG. Maximising
    the overall figure alone overfits a few near-saturated queries.
    """
    tune_items = [item for item in items if item.query.split == "tune"]
    best: tuple[float, float] | None = None
    best_params = DEFAULT_PARAMS
    grid = itertools.product(
        (0.0, 0.05, 0.1, 0.2), (0.5, 0.6, 0.7, 0.8, 0.9), (0.7, 0.8, 0.9, 1.0), (0.0, 0.05, 0.1, 0.2), (1.0, 1.5, 2.0)
    )
    for base, identifier, cap, rank_weight, decades in grid:
        params = replace(
            DEFAULT_PARAMS,
            base_lexical_weight=base,
            identifier_weight=identifier,
            max_lexical_weight=cap,
            rrf_weight=rank_weight,
            rarity_decades=decades,
        )
        scores = evaluate(tune_items, doc_freq, params)["tune"]
        margin = min(
            scores["paraphrase"]["hybrid"] - scores["paraphrase"]["dense"],
            scores["identifier"]["hybrid"] - scores["identifier"]["bm25"],
        )
        key = (round(margin, 4), scores["all"]["hybrid"])
        if best is None or key > best:
            best, best_params = key, params
    assert best is not None
    print(f"best on tune: worst-kind margin {best[0]:+.4f}, nDCG {best[1]:.4f}: {best_params}", file=sys.stderr)
    return best_params


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"{'split':<8} {'kind':<11} {'n':>3} " + " ".join(f"{method:>7}" for method in METHODS))
    for split, kinds in results.items():
        for kind, scores in kinds.items():
            row = " ".join(f"{scores[method]:7.3f}" for method in METHODS)
            print(f"{split:<8} {kind:<11} {int(scores['queries']):>3} {row}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"))
    parser.add_argument("--candidates", type=int, default=50, help="top-n taken from each list")
    parser.add_argument("--tune", action="store_true", help="grid-search fusion parameters on the tune split")
    arguments = parser.parse_args()

    data = json.loads(DATA_PATH.read_text())
    started = time.perf_counter()
    index = RetrievalIndex(data["memories"], get_embedder(arguments.embedder))
    items = gather(index, load_queries(data), arguments.candidates)
    params = tune(items, index.doc_freq) if arguments.tune else DEFAULT_PARAMS
    results = evaluate(items, index.doc_freq, params)
    print(f"{len(data['memories'])} memories, {len(items)} queries, embedder {index.embedder.name}, "
          f"{time.perf_counter() - started:.1f}s")
    print_table(results)
    print(json.dumps({"embedder": index.embedder.name, "params": asdict(params), "ndcg@10": results}))


if __name__ == "__main__":
    main()
