#!/usr/bin/env python
"""Export -> import -> the same top 10 (issue 34): how faithfully ``memory export --format jsonl`` and
``memory import`` carry a store into a fresh data dir.

A store is built from LoCoMo-shaped conversations through ``ingest_conversation``
(every turn a memory; Maharana et al., "Evaluating Very Long-Term Conversational
Memory of LLM Agents", ACL 2024), then given history: every 50th memory gets a new
version and every 97th is deleted. Up to ``--queries`` of the conversations'
questions (round robin over the files) are asked of it (k=10, every namespace,
no access recorded), the store is exported, imported into a fresh data dir with the
same configuration (or ``--target-embedder``'s, which re-embeds), and the same
questions asked again. Reported: for how many questions the top 10 is the same list,
the same set, the export and import times and the file's size. The last line is one
JSON object. ``--smoke``: tests/data/locomo_smoke.json, the hashing embedder, 10 questions.

    .venv/bin/python scripts/bench_portable.py /work/shared/data/locomo-tune/*.json [--embedder minilm]

``export_import_top10`` is the measurement on its own, for another script to call
with its own store and questions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, print_result, smoke

from node.config import load_config
from node.memory import (
    SearchRequest,
    delete,
    export_to_path,
    import_path,
    ingest_conversation,
    update_from_request,
)
from node.memory.facade import Memory
from tests.support.sessions.locomo import load

SMOKE_FILE = Path(__file__).resolve().parents[1] / "tests" / "data" / "locomo_smoke.json"


def top10(memory: Memory, queries: list[str]) -> list[list[str]]:
    return [[hit.crystal.id for hit in memory.search(SearchRequest(query, k=10, namespaces=(), record_access=False))]
            for query in queries]


def export_import_top10(source: Memory, queries: list[str], work_dir: Path,
                        target_embedder: str | None = None,
                        memory_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Export ``source``, import it into a fresh data dir under ``work_dir`` (its embedder, or
    ``target_embedder``'s; ``memory_settings``: more ``[memory]`` settings of the fresh node), and
    count the ``queries`` whose top 10 is unchanged."""
    before = top10(source, queries)
    path = work_dir / "memory.jsonl"
    started = time.perf_counter()
    exported = export_to_path(source, path)
    export_s = time.perf_counter() - started
    embedder = target_embedder or source.config.memory.embedder
    settings = (memory_settings or {}) | {"embedder": embedder}
    target = Memory(load_config(work_dir / "restored", overrides={"memory": settings}, environ={}))
    try:
        started = time.perf_counter()
        imported = import_path(target, path)
        import_s = time.perf_counter() - started
        after = top10(target, queries)
    finally:
        target.close()
    return {"queries": len(queries), "after": after,
            "same_top10": sum(a == b for a, b in zip(before, after, strict=True)),
            "same_set": sum(set(a) == set(b) for a, b in zip(before, after, strict=True)),
            "crystals": exported["crystals"], "imported": imported["imported"], "bytes": exported["bytes"],
            "vectors": imported["vectors"], "export_s": round(export_s, 2), "import_s": round(import_s, 2)}


def build(memory: Memory, files: list[Path]) -> int:
    """Ingest every conversation, then give the store history (versions, deletions); its crystals."""
    for path in files:
        ingest_conversation(memory, path.read_bytes())
    ids = [row[0] for row in memory.db.all("SELECT id FROM crystals ORDER BY rowid")]
    for number, crystal_id in enumerate(ids):
        if number % 97 == 96:
            delete(memory, crystal_id)
        elif number % 50 == 49:
            text = memory.store.get(crystal_id).text
            update_from_request(memory, crystal_id, {"text": text + " (corrected)"})
    return int(memory.store.stats()["total"])


def questions(files: list[Path], count: int) -> list[str]:
    """Up to ``count`` questions, round robin over the files."""
    lists = [[question.text for question in load(path).questions] for path in files]
    chosen: list[str] = []
    for index in range(max((len(each) for each in lists), default=0)):
        for each in lists:
            if index < len(each) and len(chosen) < count:
                chosen.append(each[index])
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="LoCoMo-shaped conversation files")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--target-embedder", default=None, help="import with this embedder (re-embeds)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef-search", type=int, default=None,
                        help="memory.hnsw_ef_search of both stores (at least the store's size: exact search)")
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), files=[SMOKE_FILE], embedder="hashing", queries=10)
    if not arguments.files:
        parser.error("name the conversation files (e.g. /work/shared/data/locomo-tune/*.json)")
    settings = {} if arguments.ef_search is None else {"hnsw_ef_search": arguments.ef_search}
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        source = Memory(load_config(work / "source", overrides={"memory": settings | {
            "embedder": arguments.embedder}}, environ={}))
        try:
            started = time.perf_counter()
            stored = build(source, arguments.files)
            build_s = time.perf_counter() - started
            asked = questions(arguments.files, arguments.queries)
            # Deleted memories are never exported; until a consolidation purges them, the source's
            # BM25 statistics and index still count them. Measured both ways.
            with_tombstones = top10(source, asked)
            source.purge(())
            result = export_import_top10(source, asked, work, arguments.target_embedder, settings)
        finally:
            source.close()
    after = result.pop("after")
    print_result({"benchmark": "export_import_top10", "embedder": arguments.embedder,
                  "target_embedder": arguments.target_embedder or arguments.embedder,
                  "ef_search": arguments.ef_search, "stored": stored, "build_s": round(build_s, 1), **result,
                  "same_top10_before_purge": sum(a == b for a, b in zip(with_tombstones, after, strict=True))})


if __name__ == "__main__":
    main()
