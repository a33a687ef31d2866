"""The capture queue and its worker on real files and a real store: bounded, coalesced, torn lines
and tampered entries survived, failures kept with a count and finally set aside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import node.capture.queue as queue_module
from node.capture import CaptureQueue, QueueEntry, drain_queue
from node.cli.local import LocalNode
from node.config import load_config
from node.init import init_node
from node.memory import Memory
from tests.support.sessions.claude_code import write_session


def entry(path: str, event: str = "Stop", session: str = "s1") -> QueueEntry:
    return QueueEntry.new("claude-code", event, session, path, "default")


def test_a_full_queue_is_coalesced_per_transcript_and_keeps_a_session_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "MAX_QUEUE_BYTES", 2000)
    queue = CaptureQueue(tmp_path)
    queue.append(entry("/t/a.jsonl", "SessionEnd"))
    for _ in range(20):
        queue.append(entry("/t/a.jsonl"))
        queue.append(entry("/t/b.jsonl"))
    kept = queue.read()
    assert len(kept) < 41 and {item.transcript_path for item in kept} == {"/t/a.jsonl", "/t/b.jsonl"}
    assert ("/t/a.jsonl", "SessionEnd") in {(item.transcript_path, item.event) for item in kept}
    with pytest.raises(queue_module.QueueFull):
        for index in range(40):
            queue.append(entry(f"/t/{index}.jsonl"))
    assert len(queue.path.read_bytes()) <= 2000


def test_a_torn_or_foreign_line_is_dropped_not_fatal(tmp_path: Path) -> None:
    queue = CaptureQueue(tmp_path)
    queue.directory.mkdir()
    queue.path.write_bytes(b'{"id": "x", "not": "an entry"}\n[[[[\n{"id": "torn", "host"')
    queue.append(entry("/t/a.jsonl"))
    assert [item.transcript_path for item in queue.read()] == ["/t/a.jsonl"]
    queue.settle(set(), {queue.read()[0].id: "boom"})
    assert queue.path.read_bytes().count(b"\n") == 1  # the rewrite kept only the entry


def test_failures_are_counted_and_finally_set_aside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "MAX_ATTEMPTS", 3)
    queue = CaptureQueue(tmp_path)
    queue.append(entry("/t/a.jsonl"))
    for attempt in (1, 2):
        queue.settle(set(), {queue.read()[0].id: f"failure {attempt}"})
        assert queue.read()[0].attempts == attempt and queue.read()[0].error == f"failure {attempt}"
    queue.settle(set(), {queue.read()[0].id: "failure 3"})
    assert queue.read() == []
    assert json.loads(queue.rejected_path.read_text())["attempts"] == 3


def test_the_worker_stores_good_entries_and_drops_tampered_ones(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    init_node(data_dir, name="agent", embedder="hashing")
    good = write_session(tmp_path / "good.jsonl", "good-1", [("user", "Where do the nightly backups go?"),
                                                             ("assistant", "To the cold-storage bucket nightly-bk.")])
    queue = CaptureQueue(data_dir)
    queue.append(entry(str(good), session="good-1"))
    # Entries written straight into the file: the worker checks them as the hook does.
    for forged in ("/proc/self/environ", str(data_dir / "identity.key"), str(tmp_path / "gone.jsonl")):
        queue.append(entry(forged))
    local = LocalNode(lambda: Memory(load_config(data_dir, environ={})))
    try:
        report = drain_queue(queue, lambda: local, data_dir)
        assert (report.stored, report.dropped, report.failed, report.added) == (1, 3, 0, 2)
        assert queue.read() == []
        hits = local.memory_search("cold-storage bucket for nightly backups")
        assert hits[0]["turn"]["session"] == "good-1"
        assert not any("identity" in (hit["crystal"].get("path") or "") for hit in hits)
    finally:
        local.close()


def test_a_second_worker_finds_the_first_busy(tmp_path: Path) -> None:
    from node.memory import file_lock

    queue = CaptureQueue(tmp_path)
    queue.append(entry("/t/a.jsonl"))
    with file_lock(queue.drain_lock_path):
        report = drain_queue(queue, lambda: pytest.fail("a busy worker opens no client"), tmp_path)
    assert report.busy and len(queue.read()) == 1


def test_an_entry_queued_while_the_worker_runs_is_served_by_it(tmp_path: Path) -> None:
    """A hook that fires mid-drain finds the worker running and starts none: this one must take it."""
    data_dir = tmp_path / "node"
    init_node(data_dir, name="agent", embedder="hashing")
    first = write_session(tmp_path / "a.jsonl", "a", [("user", "The build cache lives in /var/cache/bk.")])
    second = write_session(tmp_path / "b.jsonl", "b", [("user", "The release train leaves on Tuesdays.")])
    queue = CaptureQueue(data_dir)
    queue.append(entry(str(first), session="a"))

    class HookFiresMidDrain(LocalNode):
        def memory_ingest_transcript(self, path: str, **options: Any) -> dict[str, Any]:
            if path == str(first):
                assert queue.worker_running()
                queue.append(entry(str(second), session="b"))
            return super().memory_ingest_transcript(path, **options)

    local = HookFiresMidDrain(lambda: Memory(load_config(data_dir, environ={})))
    try:
        report = drain_queue(queue, lambda: local, data_dir)
        assert (report.stored, report.added) == (2, 2) and queue.read() == []
        assert local.memory_search("release train day")[0]["turn"]["session"] == "b"
    finally:
        local.close()
