#!/usr/bin/env python
"""Long memories: is a detail deep inside a long crystal still found by meaning?

The embedder reads at most one window of tokens (256 for MiniLM). A longer text
used to be cut there, so whatever came later was invisible to dense search.
Now it is embedded window by window and the windows' vectors are averaged
(``node.memory.embedder.OnnxEmbedder``). This compares the two on long notes.

The notes are built from the hand-written retrieval sets (tests/data/retrieval_v2,
_fresh and _fresh2; ids prefixed by set). Their memories are shuffled with a
fixed seed and joined ``--group`` at a time (20 by default: ~520 tokens, two or
three windows) into notes. Every query of the three sets is kept. A note's
grade for a query is the best grade of the memories in it. A query counts as
**head** when its first grade-2 memory starts inside the note's first window,
else as **tail**. Each variant ingests the same notes into a fresh store and
index (real SQLite, FTS5, HNSW, MiniLM int8). It then reports nDCG@10 and MRR
of dense-only search (HNSW) and of the product's ``Memory.search``, for head,
tail and all queries.

Nothing here is tuned: the window is the model's own length and the overlap
(32 tokens) was fixed before this ran; the cap on windows per text (16, a
bound on cost) is above what these notes need.

    .venv/bin/python scripts/bench_long_memories.py [--group 20]

The last line is JSON; ``ratio`` is windows / truncation for each figure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_retrieval import Query, load, ndcg, reciprocal_rank

from node.config import NodeConfig
from node.memory.embedder import MAX_WINDOWS, MiniLMEmbedder
from node.memory.facade import Memory, SearchRequest

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = ("retrieval_v2", "retrieval_fresh", "retrieval_fresh2")
SEED = 17
VARIANTS = {"windows": MAX_WINDOWS, "truncation": 1}  # max_windows


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


def run_variant(max_windows: int, notes: list[dict[str, str]], queries: list[Query],
                where: dict[str, str], data_dir: Path) -> dict[str, Any]:
    config = NodeConfig()
    config.data_dir = data_dir
    memory = Memory(config, embedder=MiniLMEmbedder(max_windows=max_windows))
    try:
        results = memory.add_crystals([memory.prepare(note["text"]) for note in notes])
        by_rowid = {result.rowid: note["id"] for note, result in zip(notes, results, strict=True)}
        by_crystal = {result.id: note["id"] for note, result in zip(notes, results, strict=True)}
        scores: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for query in queries:
            vector = memory.embed([query.text])[0]
            dense = [by_rowid[rowid] for rowid, _ in memory.index.query(vector, 10)]
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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", type=int, default=20, help="memories per note")
    arguments = parser.parse_args()
    counter = MiniLMEmbedder(max_windows=1)
    notes, queries, where = build_notes(
        arguments.group, lambda text: len(counter.tokenize([text])[0][0]) - 2, counter.max_tokens
    )
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="crystalmesh-bench-long-") as tmp:
        for variant, max_windows in VARIANTS.items():
            report[variant] = run_variant(max_windows, notes, queries, where, Path(tmp) / variant)
    print(f"{len(notes)} notes of {arguments.group} memories; {len(queries)} queries "
          f"({sum(1 for v in where.values() if v == 'head')} head, {sum(1 for v in where.values() if v == 'tail')} tail)")
    print(f"{'figure':<16}{'n':>5}  {'truncation nDCG/MRR':>22}  {'windows nDCG/MRR':>20}")
    ratio: dict[str, float] = {}
    for key in report["windows"]:
        old, new = report["truncation"][key], report["windows"][key]
        print(f"{key:<16}{new['n']:>5}  {old['ndcg@10']:>14.3f}/{old['mrr']:.3f}  {new['ndcg@10']:>12.3f}/{new['mrr']:.3f}")
        ratio[key] = round(new["ndcg@10"] / old["ndcg@10"], 3) if old["ndcg@10"] else 0.0
    print(json.dumps({"group": arguments.group, "notes": len(notes), "queries": len(queries),
                      **report, "ratio": ratio}))


if __name__ == "__main__":
    main()
