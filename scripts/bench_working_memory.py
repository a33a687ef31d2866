#!/usr/bin/env python
"""Working memory costs: a durable note vs a plain ``memory add``, and a dream on a full store.

    .venv/bin/python scripts/bench_working_memory.py [--crystals 5000] [--notes 50] [--embedder hashing]

A store of ``--crystals`` memories (created 3 days ago, as earlier sessions) is
built first. Then, in the same process: ``--notes`` plain ``Memory.add`` calls
(the baseline) and ``--notes`` ``WorkingMemory.note`` calls (the same work plus
an fsynced scratch line under a file lock), median latency of each; then one
dream (extractive synthesiser, pointer checks through ``Memory.search``) over
everything. The last line is one JSON object. ``--smoke``: 200 memories, 5 notes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _bench import add_smoke_flag, percentile, print_result, smoke

from node.config import load_config
from node.crystals.model import now_ms
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend
from node.memory.working.working import WorkingMemory

TOPICS = ["backup", "migration", "latency", "bucket", "cluster", "retention", "deploy", "certificate",
          "replica", "queue", "cache", "schema", "index", "firewall", "budget", "invoice"]


def memory_text(i: int) -> str:
    return (f"Session {i}: the {TOPICS[i % 16]} work on host-{i % 97} touched {TOPICS[(i * 7) % 16]} "
            f"and {TOPICS[(i * 11) % 16]}; ticket OPS-{1000 + i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crystals", type=int, default=5000)
    parser.add_argument("--notes", type=int, default=50)
    parser.add_argument("--embedder", default="hashing")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), crystals=200, notes=5)
    with tempfile.TemporaryDirectory() as directory:
        config = load_config(Path(directory) / "node", overrides={"memory": {"embedder": args.embedder}},
                             environ={})
        memory = Memory(config)
        try:
            old = now_ms() - 3 * 86_400_000
            batch = [memory.prepare(memory_text(i), created_at_ms=old) for i in range(args.crystals)]
            for start in range(0, len(batch), 500):
                memory.add_crystals(batch[start : start + 500])
            working = WorkingMemory(config.data_dir, MemoryBackend(memory))
            add_ms, note_ms = [], []
            for i in range(args.notes):
                began = time.perf_counter()
                memory.add(f"baseline memory {i}: the user prefers option {i}")
                add_ms.append((time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                working.note(f"working note {i}: the user prefers option {i}", 0.7)
                note_ms.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            result = working.dream()
            dream_ms = (time.perf_counter() - began) * 1000
        finally:
            memory.close()
    report = {
        "crystals": args.crystals, "notes": args.notes, "embedder": args.embedder,
        "add_median_ms": round(percentile(add_ms, 50), 3),
        "note_median_ms": round(percentile(note_ms, 50), 3),
        "note_over_add": round(percentile(note_ms, 50) / percentile(add_ms, 50), 3),
        "dream_ms": round(dream_ms, 1), "dream_status": result.status,
        "pointers": len(result.pointers), "state_chars": result.state_chars,
    }
    print(f"note median {report['note_median_ms']} ms vs add {report['add_median_ms']} ms; "
          f"dream over {args.crystals} crystals: {report['dream_ms']} ms ({result.status})")
    print_result(report)


if __name__ == "__main__":
    main()
