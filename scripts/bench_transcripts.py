#!/usr/bin/env python3
"""Transcript ingest: a Claude Code session of over 3 MB, whole, then grown by ten messages.

The transcript is generated in Claude Code's shape (``tests/support/sessions/transcripts.py``: user
prompts, thinking, text, tool calls and results, progress events, file snapshots, subagent
sidechains, a secret now and then) and ingested the way ``crystalmesh memory ingest
--transcript`` does without a node (``LocalNode.memory_ingest_transcript``: the file read in
chunks, each chunk stored by the node's function) into a fresh data dir. Reported: messages/s
and MB/s of the whole ingest (wall and CPU time of this process, which embeds), then the
seconds to re-ingest after 10 new messages are appended (issue 34's target: ≤ 1 s). The
store is opened once, as a running node holds it; the incremental figure excludes opening it.

The last line is one JSON object. ``--smoke``: 60 messages, the hashing embedder.

    python scripts/bench_transcripts.py [--messages 1500] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from _bench import add_smoke_flag, print_result, smoke

from node.cli.local import LocalNode
from node.config import NodeConfig
from node.memory import Memory
from tests.support.sessions.transcripts import (
    SESSION,
    START,
    claude_code_line,
    claude_code_transcript,
    jsonl,
    write_transcript,
)

GROWTH = 10  # messages appended before the incremental ingest


def growth(count: int) -> list[dict[str, Any]]:
    """``count`` new messages of the same session, a day later: a prompt, then its answer, ..."""
    at = START + timedelta(days=1)
    return [claude_code_line("user" if index % 2 == 0 else "assistant",
                             f"follow-up {index}: the staging deploy works again after pinning the key"
                             if index % 2 == 0 else
                             [{"type": "text", "text": f"Noted ({index}): the fix was the pinned staging key."}],
                             at=at + timedelta(seconds=index), line_id=f"00000000-0000-4000-8000-{index:012d}")
            for index in range(count)]


def timed(run: Any) -> tuple[Any, float, float]:
    """``run()``'s result, wall seconds and CPU seconds of this process."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1500, help="lines of the generated session")
    parser.add_argument("--embedder", default="minilm")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(argv), messages=60, embedder="hashing")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        path = write_transcript(root / f"{SESSION}.jsonl",
                                claude_code_transcript(args.messages, secret_every=50, sidechain_every=7))
        size = path.stat().st_size
        config = NodeConfig()
        config.data_dir = root / "node"
        config.memory.embedder = args.embedder
        config.data_dir.mkdir()
        memory = Memory(config)
        node = LocalNode(lambda: memory)
        try:
            whole, wall_s, cpu_s = timed(lambda: node.memory_ingest_transcript(str(path)))
            with path.open("ab") as handle:
                handle.write(jsonl(growth(GROWTH)))
            grown, grow_wall_s, grow_cpu_s = timed(lambda: node.memory_ingest_transcript(str(path)))
        finally:
            node.close()
    read = whole["messages_read"]
    print_result({
        "embedder": args.embedder, "cores": os.cpu_count(), "transcript_bytes": size,
        "messages_read": read, "turns_added": whole["added"], "skipped": whole["skipped"],
        "redacted": whole["redacted"], "dropped": whole["dropped"],
        "whole": {"wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2),
                  "messages_per_s": round(read / wall_s, 1), "mb_per_s": round(size / 1e6 / wall_s, 3),
                  "messages_per_cpu_s": round(read / cpu_s, 1)},
        "grown": {"new_messages": grown["messages_read"], "added": grown["added"],
                  "wall_s": round(grow_wall_s, 3), "cpu_s": round(grow_cpu_s, 3), "target_s": 1.0},
    })


if __name__ == "__main__":
    main()
