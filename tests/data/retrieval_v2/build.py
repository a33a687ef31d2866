#!/usr/bin/env python
"""Bookkeeping only: turn the hand-written m*.txt / q*.txt files into tests/data/retrieval_v2.json.

Memories: ``id | text``. Queries: ``kind | text | id:grade ...``. Query ids are
``<kind>-<nnn>`` in file order; the split is fixed by the first byte of
sha256(query id): even -> tune, odd -> heldout (decided before any evaluation).

    python tests/data/retrieval_v2/build.py
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "retrieval_v2.json"
KINDS = ("paraphrase", "identifier", "keyword", "multi-hop", "negation-trap")


def lines(pattern: str) -> list[list[str]]:
    rows = []
    for path in sorted(HERE.glob(pattern)):
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                rows.append([part.strip() for part in line.split(" | ")])
    return rows


def split_of(query_id: str) -> str:
    return "tune" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "heldout"


def main() -> None:
    memories = [{"id": row[0], "text": row[1]} for row in lines("m*.txt")]
    ids = [m["id"] for m in memories]
    assert len(ids) == len(set(ids)), "duplicate memory id"
    counters: Counter[str] = Counter()
    queries = []
    for kind, text, relevant in lines("q*.txt"):
        assert kind in KINDS, kind
        query_id = f"{kind}-{counters[kind]:03d}"
        counters[kind] += 1
        grades = {key: int(grade) for key, grade in (item.split(":") for item in relevant.split())}
        missing = set(grades) - set(ids)
        assert not missing, (query_id, missing)
        queries.append(
            {
                "id": query_id,
                "kind": kind,
                "split": split_of(query_id),
                "text": text,
                "relevant": grades,
            }
        )
    data = {
        "description": (
            "Hand-written agent memories of one imagined user (Maya, a backend engineer in Lisbon) "
            "and judged queries (grade 2 = answers it, 1 = useful context). Kinds: paraphrase, "
            "identifier, keyword, multi-hop, negation-trap. split = tune if sha256(query id)[0] is "
            "even else heldout, fixed before any evaluation. Source: tests/data/retrieval_v2/*.txt, "
            "built by tests/data/retrieval_v2/build.py."
        ),
        "split_rule": "tune if sha256(query_id)[0] % 2 == 0 else heldout",
        "memories": memories,
        "queries": queries,
    }
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    splits = Counter((q["kind"], q["split"]) for q in queries)
    print(len(memories), "memories,", len(queries), "queries", dict(sorted(splits.items())))


if __name__ == "__main__":
    main()
