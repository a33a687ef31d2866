"""``crystalmesh memory ingest --transcript`` against a temporary data dir (no node running): the
summary line and progress, a grown file, errors as one line, and a process killed with SIGKILL
between chunks or inside one losing and repeating nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from node.config import load_config
from node.memory.facade import Memory
from tests.support.cli import Cli
from tests.support.sessions.transcripts import (
    SESSION,
    claude_code_transcript,
    codex_rollout,
    jsonl,
    write_transcript,
)

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_ingest_a_transcript_then_its_growth(initialised: Cli, tmp_path: Path) -> None:
    lines = claude_code_transcript(30, secret_every=2)
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", lines[:20])
    code, out, err = initialised.run("memory", "ingest", "--transcript", str(path))
    assert code == 0, err
    assert f"read {path.stat().st_size}/{path.stat().st_size} bytes" in err  # progress, on stderr
    summary = out.strip().splitlines()
    assert len(summary) == 1 and " messages added, 0 already stored, of " in summary[0]
    assert f"(session {SESSION}, claude-code)" in summary[0] and "redacted: api_key " in summary[0]
    assert summary[0].endswith(f"offset {path.stat().st_size}")

    write_transcript(path, lines)
    grown = initialised.json("memory", "ingest", "--transcript", str(path), "--format", "claude-code")
    assert grown["added"] > 0 and grown["already_stored"] == 0 and grown["offset"] == path.stat().st_size
    hits = initialised.json("memory", "search", "tool Grep ef_search", "-k", "1")
    assert hits[0]["turn"]["session"] == SESSION

    codex = write_transcript(tmp_path / "rollout.jsonl", codex_rollout())
    report = initialised.json("memory", "ingest", "--transcript", str(codex), "--namespace", "agent:codex")
    assert (report["format"], report["namespace"], report["added"]) == ("codex", "agent:codex", 6)


def test_errors_are_one_line(initialised: Cli, tmp_path: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(b'{"speaker": "a", "text": "hello"}\n')
    assert "cannot tell the format" in initialised.fails("memory", "ingest", "--transcript", str(odd))
    assert "one of --conversation" in initialised.fails("memory", "ingest")
    assert "one of --conversation" in initialised.fails("memory", "ingest", "--transcript", str(odd),
                                                        "--conversation", str(odd))
    assert "--format is for --transcript" in initialised.fails("memory", "ingest", "--conversation", str(odd),
                                                               "--format", "codex")
    assert initialised.json("memory", "status")["total"] == 0


def turn_rows(data_dir: Path) -> tuple[list[tuple[str, int]], int, int]:
    """(source id, turn index) of every turn, the cursor's offset, and crystals minus indexed vectors."""
    memory = Memory(load_config(data_dir, environ={}))
    try:
        rows = [(row[0], row[1]) for row in memory.db.all(
            "SELECT source_id, turn_index FROM conversation_turns ORDER BY turn_index")]
        cursor = memory.db.one("SELECT offset FROM transcript_cursors")
        return rows, int(cursor[0]) if cursor else 0, memory.store.stats()["total"] - memory.index.count
    finally:
        memory.close()


@pytest.mark.parametrize("mode", ["between", "inside"])
def test_a_kill_mid_ingest_loses_and_repeats_nothing(initialised: Cli, tmp_path: Path, mode: str) -> None:
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", claude_code_transcript(1300))
    size = path.stat().st_size
    assert size > 3 * 640 * 1024 // 2  # at least three chunks
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sessions.fault_transcript", mode, "--", "--data-dir", str(initialised.data_dir),
         "memory", "ingest", "--transcript", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        env=dict(os.environ) | {"PYTHONPATH": str(REPO)})
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"PAUSED\n", process.stderr.read() if process.stderr else ""
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    rows, offset, unindexed = turn_rows(initialised.data_dir)
    assert 0 < offset < size and rows  # the first chunk, and only it, with its cursor
    assert [index for _, index in rows] == list(range(len(rows)))
    assert unindexed == 0  # the index caught up with what the killed process committed

    resumed = initialised.json("memory", "ingest", "--transcript", str(path))
    assert resumed["bytes_read"] == size - offset and resumed["already_stored"] == 0
    rows_after, offset_after, _ = turn_rows(initialised.data_dir)
    assert offset_after == size
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    whole = jsonl(claude_code_transcript(1300))
    (fresh / f"{SESSION}.jsonl").write_bytes(whole)
    reference = Cli(initialised.capsys, tmp_path / "reference")
    reference.json("init", "--embedder", "hashing")
    expected = reference.json("memory", "ingest", "--transcript", str(fresh / f"{SESSION}.jsonl"))
    assert len(rows_after) == expected["added"] == len(rows) + resumed["added"]
    assert len({source for source, _ in rows_after}) == len(rows_after)
    assert [index for _, index in rows_after] == list(range(len(rows_after)))
