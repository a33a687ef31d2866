"""kill -9 at every durable step of a note and of a dream: no acknowledged note is lost,
none becomes two crystals, and a dream's "index + clear" is all or nothing.

Each case copies a prepared data dir, runs ``working_crash_child.py`` in a real
subprocess that SIGKILLs itself just before step N, then reopens the data dir
the way a restarted node does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from node.config import NodeConfig, load_config, save_config
from node.memory.facade import Memory, SearchRequest
from node.memory.working.backend import MemoryBackend
from node.memory.working.working import WorkingMemory

CHILD = Path(__file__).with_name("working_crash_child.py")
ROOT = Path(__file__).resolve().parents[3]
PRE_NOTES = ["User's name is Douglas", "Deadline for the API migration is March 20th",
             "Never use semicolons in JS"]
NEW_NOTES = ["The staging cluster is stg-07", "User prefers weekly summaries"]


def run_child(data_dir: Path, mode: str, kill_at: int, *texts: str) -> tuple[int, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(CHILD), mode, str(data_dir), str(kill_at), *texts],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(done.stderr)
    return done.returncode, done.stdout.splitlines()


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """A data dir with three acknowledged notes in the scratch (and their crystals)."""
    config: NodeConfig = load_config(tmp_path / "template", overrides={"memory": {"embedder": "hashing"}},
                                     environ={})
    save_config(config)
    memory = Memory(config)
    try:
        working = WorkingMemory(config.data_dir, MemoryBackend(memory))
        for text in PRE_NOTES:
            working.note(text, 0.8)
    finally:
        memory.close()
    return config.data_dir


def reopen(data_dir: Path) -> tuple[Memory, WorkingMemory]:
    memory = Memory(load_config(data_dir, environ={}))
    return memory, WorkingMemory(data_dir, MemoryBackend(memory))


def crystals_with(memory: Memory, text: str) -> int:
    return int(memory.db.one("SELECT COUNT(*) FROM crystals WHERE text=?", (text,))[0])


def check_everything_survives(memory: Memory, working: WorkingMemory, acknowledged: list[str]) -> None:
    contents = working.scratch.read()
    assert not contents.corrupt
    assert len({n.id for n in contents.notes}) == len(contents.notes)
    # the restarted node writes again: a torn line left by the crash must not swallow it
    working.note("written after the restart", 0.5)
    contents = working.scratch.read()
    assert not contents.corrupt and contents.notes[-1].text == "written after the restart"
    acknowledged = [*acknowledged, "written after the restart"]
    for text in acknowledged:
        assert crystals_with(memory, text) <= 1
    assert working.dream().status == "written"
    assert working.pending_notes() == []
    for text in acknowledged:
        assert crystals_with(memory, text) == 1, text
        hits = memory.search(SearchRequest(text, 3, record_access=False))
        assert hits[0].crystal.text == text


def steps_of(template: Path, tmp_path: Path, mode: str, *texts: str) -> int:
    trial = tmp_path / "count"
    shutil.copytree(template, trial)
    code, out = run_child(trial, mode, 0, *texts)
    assert code == 0, out
    return int(out[-1].split()[1])


@pytest.mark.slow
def test_kill_mid_note_loses_no_acknowledged_note(template: Path, tmp_path: Path) -> None:
    total = steps_of(template, tmp_path, "note", *NEW_NOTES)
    print("note steps", total)
    assert total >= 6
    for kill_at in range(1, total + 1):
        trial = tmp_path / f"note-{kill_at}"
        shutil.copytree(template, trial)
        code, out = run_child(trial, "note", kill_at, *NEW_NOTES)
        assert code == -signal.SIGKILL
        acknowledged = PRE_NOTES + [line[4:] for line in out if line.startswith("ACK ")]
        memory, working = reopen(trial)
        try:
            pending = {n.text for n in working.pending_notes()}
            assert set(acknowledged) <= pending, (kill_at, pending)
            check_everything_survives(memory, working, acknowledged)
        finally:
            memory.close()


@pytest.mark.slow
def test_kill_mid_dream_is_all_or_nothing(template: Path, tmp_path: Path) -> None:
    total = steps_of(template, tmp_path, "dream")
    print("dream steps", total)
    assert total >= 6
    outcomes = set()
    for kill_at in range(1, total + 1):
        trial = tmp_path / f"dream-{kill_at}"
        shutil.copytree(template, trial)
        code, _ = run_child(trial, "dream", kill_at)
        assert code == -signal.SIGKILL
        memory, working = reopen(trial)
        try:
            pending = {n.text for n in working.pending_notes()}  # recovery runs here
            dreamt = working.state_path.exists()
            # atomic: either the dream happened (state written, notes consumed) or not at all
            assert (dreamt and pending == set()) or (not dreamt and pending == set(PRE_NOTES)), kill_at
            assert not working.journal_path.exists()
            outcomes.add(dreamt)
            check_everything_survives(memory, working, PRE_NOTES)
        finally:
            memory.close()
    assert outcomes == {True, False}  # some kills came before the commit point, some after
