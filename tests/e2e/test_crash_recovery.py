"""SIGKILL a process in the middle of ingesting; everything it reported committed survives."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from node.config import load_config
from node.memory.facade import Memory, SearchRequest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

# Ingests batches of crystals forever, printing each id once its batch has committed.
CHILD = """
import sys
from node.config import load_config
from node.memory.facade import Memory

config = load_config(sys.argv[1], overrides={"memory": {"embedder": "hashing"}}, environ={})
memory = Memory(config)
print("ready", memory.index_state, flush=True)
number = int(sys.argv[2])
while True:
    batch = [memory.prepare(f"crash crystal {number + i} marker{number + i}") for i in range(25)]
    results = memory.add_crystals(batch)
    sys.stdout.write("".join(result.id + "\\n" for result in results))
    sys.stdout.flush()
    number += len(batch)
"""


def crystal_number(text: str) -> int:
    return int(text.split()[2])


def ingest_then_kill(data_dir: Path, start: int, wanted: int) -> list[str]:
    """Run the child until it has reported ``wanted`` committed ids, SIGKILL it, return all ids."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTALMESH_")}
    env["CRYSTALMESH_HOME"] = str(data_dir.parent / "home")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    reported: list[str] = []
    deadline = time.monotonic() + 120
    try:
        first = lines.get(timeout=60)
        assert first is not None and first.startswith("ready"), child.stderr.read() if child.stderr else ""
        while len(reported) < wanted:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, child.stderr.read() if child.stderr else ""
            reported.append(line.strip())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    reader.join(timeout=30)
    # Lines flushed before the kill are committed too; a torn last line is not an id.
    while not lines.empty():
        line = lines.get_nowait()
        if line is not None and line.endswith("\n") and len(line.strip()) == 36:
            reported.append(line.strip())
    assert child.returncode == -signal.SIGKILL
    return reported


def check_recovered(data_dir: Path, reported: list[str]) -> Memory:
    config = load_config(data_dir, overrides={"memory": {"embedder": "hashing"}}, environ={})
    memory = Memory(config)
    assert memory.index_state in {"caught_up", "rebuilt"}
    integrity = memory.store.db.execute("PRAGMA integrity_check").fetchone()[0]
    assert integrity == "ok"
    memory.store.db.execute("INSERT INTO crystals_fts(crystals_fts) VALUES('integrity-check')")
    stored = {
        row[0] for row in memory.store.db.execute("SELECT id FROM crystals").fetchall()
    }
    missing = set(reported) - stored
    assert not missing, f"{len(missing)} committed crystals lost"
    vectors, _ = memory.store.vector_stats()
    assert memory.index.count == vectors == len(stored)

    last = memory.store.get(reported[-1])
    hits = memory.search(SearchRequest(f"marker{crystal_number(last.text)}", k=3))
    assert hits and hits[0].crystal.id == last.id
    return memory


def test_sigkill_mid_ingest_loses_nothing_committed(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    # Past INDEX_SAVE_EVERY (1000), so the index on disk is a real, older snapshot.
    first_run = ingest_then_kill(data_dir, start=0, wanted=1300)
    memory = check_recovered(data_dir, first_run)
    after_first = memory.store.stats()["total"]
    memory.close()

    # A second crash on top of the recovered data dir.
    second_run = ingest_then_kill(data_dir, start=after_first + 10_000, wanted=200)
    memory = check_recovered(data_dir, first_run + second_run)
    try:
        assert memory.store.stats()["total"] >= len(set(first_run + second_run))
    finally:
        memory.close()
