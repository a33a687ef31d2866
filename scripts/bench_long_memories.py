#!/usr/bin/env python
"""Long memories: is a detail deep inside a long crystal still found by meaning?

The embedder reads at most one window of tokens (256 for MiniLM). A longer text
used to be cut there, so whatever came later was invisible to dense search.
Now it is embedded window by window and the windows' vectors are averaged
(``node.memory.embedding.embedder.OnnxEmbedder``), and the windows' own vectors are kept
beside the crystal so that search scores it by ``max(mean, best window)``
(``node.memory.search.windows``). This compares the three on long notes:

* ``truncation``: ``max_windows=1``, the first window only (the old behaviour);
* ``windows``: the windows' mean alone (notes stored from ``embedder.embed``'s
  vectors, so no window vectors are kept: the behaviour before best windows);
* ``best``: what ``Memory.add_crystals`` stores now, mean and window vectors.

The notes are built from the hand-written retrieval sets (tests/data/retrieval_v2,
_fresh and _fresh2; ids prefixed by set). Their memories are shuffled with a
fixed seed and joined ``--group`` at a time (20 by default: ~520 tokens, two or
three windows) into notes. Every query of the three sets is kept. A note's
grade for a query is the best grade of the memories in it. A query counts as
**head** when its first grade-2 memory starts inside the note's first window,
else as **tail**. Each variant ingests the same notes into a fresh store and
index (real SQLite, FTS5, HNSW, MiniLM int8), timed. It then reports nDCG@10 and
MRR of dense-only search (the HNSW's 50 nearest re-scored by
``best_window_dense`` as the product does: a no-op without window vectors) and
of the product's ``Memory.search``, for head, tail and all queries.

Nothing here is tuned: the window is the model's own length and the overlap
(32 tokens) was fixed before this ran; the cap on windows per text (16, a
bound on cost) is above what these notes need. The best-window score is
``max(mean cosine, best window cosine)``, chosen before the first run.

    .venv/bin/python scripts/bench_long_memories.py [--group 20]

The last line is JSON; ``ratio`` is best / truncation and ``ratio_windows``
windows / truncation for each figure; ``ingest_s`` the time to embed and store.
``--smoke``: the first 6 notes and 12 queries judged on them (grades outside them dropped).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# tests/ is not an installed package: the evaluation harness is read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, print_result

from node.config import NodeConfig
from node.memory.embedding.embedder import MAX_WINDOWS, MiniLMEmbedder
from node.memory.facade import Memory, SearchRequest
from node.memory.search.windows import best_window_dense
from tests.support.retrieval import Query, load, ndcg, reciprocal_rank

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = ("retrieval_v2", "retrieval_fresh", "retrieval_fresh2")
SEED = 17
VARIANTS = {"truncation": (1, True), "windows": (MAX_WINDOWS, False), "best": (MAX_WINDOWS, True)}
"""name -> (max_windows, whether window vectors are stored)"""
CANDIDATES = 50  # the dense candidates Memory.search reads for k=10
SMOKE_NOTES, SMOKE_QUERIES = 6, 12


def build_notes(group: int, tokens: Callable[[str], int], window: int,
                seed: int = SEED) -> tuple[list[dict[str, str]], list[Query], dict[str, str]]:
    """Notes of ``group`` memories each, every query of the three sets re-judged on notes, and
    per query ``head`` or ``tail``: whether its first grade-2 memory starts inside the note's
    first ``window`` tokens (``tokens(text)``: a memory's length without CLS/SEP)."""
    memories: list[dict[str, str]] = []
    queries: list[Query] = []
    for name in SETS:
        items, asked = load(DATA / f"{name}.json")
        memories += [{"id": f"{name}:{item['id']}", "text": item["text"]} for item in items]
        queries += [Query(f"{name}:{q.id}", q.kind, q.split, q.text,
                          {f"{name}:{key}": grade for key, grade in q.relevant.items()}) for q in asked]
    random.Random(seed).shuffle(memories)
    notes: list[dict[str, str]] = []
    home: dict[str, str] = {}  # memory id -> note id
    offset: dict[str, int] = {}  # memory id -> tokens before it in its note
    for start in range(0, len(memories), group):
        chunk = memories[start : start + group]
        note_id = f"note-{len(notes):03d}"
        notes.append({"id": note_id, "text": "\n".join(item["text"] for item in chunk)})
        before = 0
        for item in chunk:
            home[item["id"]] = note_id
            offset[item["id"]] = before
            before += tokens(item["text"])
    judged: list[Query] = []
    where: dict[str, str] = {}
    for query in queries:
        relevant: dict[str, int] = {}
        for memory_id, grade in query.relevant.items():
            relevant[home[memory_id]] = max(relevant.get(home[memory_id], 0), grade)
        judged.append(Query(query.id, query.kind, query.split, query.text, relevant))
        first = min(offset[memory_id] for memory_id, grade in query.relevant.items() if grade == 2)
        where[query.id] = "head" if first + 1 < window else "tail"
    return notes, judged, where


def run_variant(max_windows: int, keep_windows: bool, notes: list[dict[str, str]], queries: list[Query],
                where: dict[str, str], data_dir: Path) -> dict[str, Any]:
    config = NodeConfig()
    config.data_dir = data_dir
    memory = Memory(config, embedder=MiniLMEmbedder(max_windows=max_windows))
    try:
        started = time.perf_counter()
        crystals = [memory.prepare(note["text"]) for note in notes]
        if keep_windows:
            results = memory.add_crystals(crystals)
        else:
            results = memory.add_crystals(crystals, memory.embed([note["text"] for note in notes]))
        ingest_s = time.perf_counter() - started
        windows = memory.db.one("SELECT COUNT(*) FROM crystal_windows")
        by_rowid = {result.rowid: note["id"] for note, result in zip(notes, results, strict=True)}
        by_crystal = {result.id: note["id"] for note, result in zip(notes, results, strict=True)}
        scores: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for query in queries:
            vector = memory.embed([query.text])[0]
            nearest = memory.index.query(vector, CANDIDATES)
            rescored = best_window_dense(memory.db, memory.index.embedder_name, vector, nearest)
            dense = [by_rowid[rowid] for rowid, _ in rescored[:10]]
            hits = memory.search(SearchRequest(query=query.text, k=10, record_access=False))
            hybrid = [by_crystal[hit.crystal.id] for hit in hits]
            for method, ranked in (("dense", dense), ("hybrid", hybrid)):
                pair = (ndcg(ranked, query.relevant), reciprocal_rank(ranked, query.relevant))
                for position in (where[query.id], "all"):
                    scores[(method, position)].append(pair)
    finally:
        memory.close()
    return {
        f"{method}/{position}": {
            "n": len(rows),
            "ndcg@10": round(sum(r[0] for r in rows) / len(rows), 4),
            "mrr": round(sum(r[1] for r in rows) / len(rows), 4),
        }
        for (method, position), rows in sorted(scores.items())
    } | {"ingest_s": round(ingest_s, 3), "crystals_with_windows": int(windows[0]) if windows else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", type=int, default=20, help="memories per note")
    add_smoke_flag(parser)
    arguments = parser.parse_args()
    counter = MiniLMEmbedder(max_windows=1)
    notes, queries, where = build_notes(
        arguments.group, lambda text: len(counter.tokenize([text])[0][0]) - 2, counter.max_tokens
    )
    if arguments.smoke:
        notes = notes[:SMOKE_NOTES]
        kept = {note["id"] for note in notes}
        queries = [Query(q.id, q.kind, q.split, q.text,
                         {note: grade for note, grade in q.relevant.items() if note in kept})
                   for q in queries]
        queries = [query for query in queries if query.relevant][:SMOKE_QUERIES]
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="crystalmesh-bench-long-") as tmp:
        for variant, (max_windows, keep_windows) in VARIANTS.items():
            report[variant] = run_variant(max_windows, keep_windows, notes, queries, where, Path(tmp) / variant)
    print(f"{len(notes)} notes of {arguments.group} memories; {len(queries)} queries "
          f"({sum(1 for v in where.values() if v == 'head')} head, {sum(1 for v in where.values() if v == 'tail')} tail)")
    print(f"{'figure':<16}{'n':>5}  {'truncation nDCG/MRR':>22}  {'windows nDCG/MRR':>20}  {'best nDCG/MRR':>16}")
    ratio: dict[str, float] = {}
    ratio_windows: dict[str, float] = {}
    for key, best in report["best"].items():
        if not isinstance(best, dict):
            continue
        old, mean = report["truncation"][key], report["windows"][key]
        print(f"{key:<16}{best['n']:>5}  {old['ndcg@10']:>14.3f}/{old['mrr']:.3f}  "
              f"{mean['ndcg@10']:>12.3f}/{mean['mrr']:.3f}  {best['ndcg@10']:>8.3f}/{best['mrr']:.3f}")
        ratio[key] = round(best["ndcg@10"] / old["ndcg@10"], 3) if old["ndcg@10"] else 0.0
        ratio_windows[key] = round(mean["ndcg@10"] / old["ndcg@10"], 3) if old["ndcg@10"] else 0.0
    print("ingest s: " + ", ".join(f"{name} {report[name]['ingest_s']:.2f}" for name in VARIANTS)
          + f"; crystals with window vectors (best): {report['best']['crystals_with_windows']}")
    print_result({"group": arguments.group, "notes": len(notes), "queries": len(queries),
                  **report, "ratio": ratio, "ratio_windows": ratio_windows})


if __name__ == "__main__":
    main()
