"""The portable JSONL export (node.memory.portable) in real stores and indexes: a round trip into a fresh data
dir keeps ids, versions, namespaces, provenance, origins, confidence and the top 10 of every query; another
embedder re-embeds; a hostile file is refused whole and nothing changes; the file is 0600."""

from __future__ import annotations

import base64
import json
import stat
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from node.cli.local import LocalNode
from node.config import load_config
from node.crystals import Origin, SemanticType, Source
from node.memory import (
    ImportRefused,
    SearchRequest,
    add_from_request,
    delete,
    export_to_path,
    import_path,
    ingest_conversation,
    update_from_request,
)
from node.memory.facade import Memory
from tests.support.sessions.conversations import jsonl_bytes, locomo_bytes

QUERIES = ["charity race", "deploy checklist", "retry budget", "rollback", "coffee", "numpy version",
           "mental health", "release notes", "the flaky migration", "skill backoff"]


def open_memory(directory: Path, embedder: str = "hashing") -> Memory:
    return Memory(load_config(directory, overrides={"memory": {"embedder": embedder}}, environ={}))


def fill(memory: Memory) -> dict[str, str]:
    """A store with every kind of row an export carries; the ids the tests look at."""
    ingest_conversation(memory, locomo_bytes())
    ingest_conversation(memory, jsonl_bytes(), namespace="team:ops")
    for run in range(3):  # three episodes fold into a fact: a confidence row and three evidence links
        memory.add(f"the staging deploy failed on friday because the migration held a lock, run {run}",
                   semantic_type=SemanticType.EPISODE)
    memory.consolidate()
    [fact] = [c for c in memory.store.list_crystals(limit=100) if c.semantic_type is SemanticType.FACT]
    docs = docs_folder(memory)  # indexed files: their chunk and file rows
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploy\n\nRun the canary first.\n\n## Rollback\n\nUse the previous tag.\n")
    (docs / "retry.py").write_text("def retry(call):\n    return call()\n")
    assert LocalNode(lambda: memory).memory_index([str(docs)])["files"]["indexed"] == 2
    first = memory.add("the deploy checklist is in docs/deploy.md")
    second = update_from_request(memory, first.id, {"text": "the deploy checklist moved to docs/release.md"})
    gone = memory.add("the old coffee machine code is 1234")
    delete(memory, gone.id)
    memory.add("the retry budget is three attempts", source=Source.FILES, origin=Origin.INDEXED,
               path="/repo/docs/retries.md", start_line=10, end_line=24)
    skill = add_from_request(memory, {"text": "Skill: retry a flaky request with backoff", "type": "skill",
                                      "scope": "private", "namespace": "agent:planner"})
    memory.record_execution(skill.id, True, 0.9)
    secret = memory.add("the staging password is hunter2, rotate it monthly")
    rated = memory.add("release notes go out on Fridays")
    memory.learning.feedback(rated.id, "wrong")  # a confidence row
    with memory.db.transaction() as conn:  # an energy tier (the energy policy writes these)
        conn.execute("INSERT INTO memory_energy(crystal_id, tier, energy, at_ms, access_count) "
                     "VALUES (?, 'short_term', 1.75, 1795000000000, 3)", (rated.id,))
        # what a dream knows of a crystal (node.memory.learning.insight_schema), as a dream writes it
        conn.execute("INSERT INTO dream_insights(crystal_id, namespace, kind, born_at_ms, last_seen_ms, sightings, "
                     "classified_by) VALUES (?, 'default', 'pattern', 1795000000000, 1795000100000, 2, 'rules')",
                     (secret.id,))
        conn.executemany("INSERT INTO dream_insight_sources(insight_id, source_id, added_at_ms) VALUES (?, ?, ?)",
                         [(secret.id, rated.id, 1795000000000), (secret.id, first.id, 1795000000001)])
        conn.execute("INSERT INTO dream_marks(crystal_id, dream_count, last_dreamed_at_ms) VALUES (?, 4, 1795)",
                     (rated.id,))
    return {"fact": fact.id, "first": first.id, "second": second["id"], "gone": gone.id, "skill": skill.id, "secret": secret.id,
            "rated": rated.id}


def docs_folder(memory: Memory) -> Path:
    return memory.config.data_dir.parent / "docs"


def dream_rows(memory: Memory) -> list[tuple[Any, ...]]:
    return [tuple(row) for table in ("dream_insights", "dream_insight_sources", "dream_marks")
            for row in memory.db.all(f"SELECT * FROM {table} ORDER BY 1, 2")]


def file_rows(memory: Memory) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in memory.db.all("SELECT * FROM indexed_chunks ORDER BY path, chunk_key")] + [
        tuple(row) for row in memory.db.all("SELECT * FROM indexed_files ORDER BY path")]


def top10(memory: Memory) -> list[list[str]]:
    return [[hit.crystal.id for hit in memory.search(SearchRequest(query, k=10, namespaces=(),
                                                                     record_access=False))]
            for query in QUERIES]


def every_crystal(memory: Memory) -> dict[str, dict[str, Any]]:
    rows = memory.db.all("SELECT id FROM crystals ORDER BY rowid")
    return {row[0]: memory.store.get(row[0]).to_dict() for row in rows}


def state(memory: Memory) -> tuple[int, int, int, int]:
    """Crystals, turn rows, confidence rows and indexed vectors: what a refused import must leave."""
    count = lambda table: int(memory.db.all(f"SELECT COUNT(*) FROM {table}")[0][0])  # noqa: E731
    return count("crystals"), count("conversation_turns"), count("knowledge"), memory.index.count


@pytest.fixture
def source(tmp_path: Path) -> Iterator[tuple[Memory, dict[str, str]]]:
    memory = open_memory(tmp_path / "source")
    try:
        yield memory, fill(memory)
    finally:
        memory.close()


def test_round_trip_into_a_fresh_data_dir(source: tuple[Memory, dict[str, str]], tmp_path: Path) -> None:
    memory, ids = source
    summary = export_to_path(memory, tmp_path / "memory.jsonl")
    path = tmp_path / "memory.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds private memories too
    lines = path.read_bytes().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "crystalmesh-memory" and header["version"] == 1
    assert header["embedder"] == memory.embedder.name and header["dim"] == memory.embedder.dim
    assert summary["crystals"] == header["counts"]["crystals"] == len(lines) - 1
    expected = every_crystal(memory)
    del expected[ids["gone"]]  # a deleted memory stays out
    # Until a consolidation purges it, the deleted memory's text still counts in the source's BM25
    # statistics and index (docs/memory.md): compare with the source as the next cycle leaves it.
    memory.purge(())
    before = top10(memory)
    origins = {hit.crystal.id: hit.to_dict()["origin"]
               for hit in memory.search(SearchRequest("charity race", namespaces=(), record_access=False))}
    confidence = memory.learning.knowledge.get(ids["rated"])

    restored = open_memory(tmp_path / "restored")
    try:
        result = import_path(restored, path)
        assert result["imported"] == len(expected) and result["vectors"] == "file" and result["embedded"] == 0
        assert every_crystal(restored) == expected  # ids, versions, validity, namespaces, provenance, counts
        assert restored.store.get(ids["first"]).to_dict()["supersededBy"] == ids["second"]
        assert restored.store.get(ids["skill"]).execution.executions == 1
        assert restored.store.get(ids["secret"]).governance.access_scope.value == "confidential"
        assert restored.learning.knowledge.get(ids["rated"]) == confidence
        assert restored.learning.knowledge.get(ids["fact"]) == memory.learning.knowledge.get(ids["fact"])
        assert sorted(restored.learning.knowledge.sources(ids["fact"])) == sorted(
            memory.learning.knowledge.sources(ids["fact"]))
        assert len(memory.learning.knowledge.sources(ids["fact"])) == 3
        assert restored.learning.knowledge.energy_states() == memory.learning.knowledge.energy_states()
        assert astuple(restored.hormones.state()) == pytest.approx(astuple(memory.hormones.state()), abs=1e-3)
        assert restored.hormones.state().cortisol > 0.9  # the source's, not a fresh node's 0.02
        assert file_rows(restored) == file_rows(memory) and len(file_rows(memory)) > 2
        assert dream_rows(restored) == dream_rows(memory) and len(dream_rows(memory)) == 4
        resync = LocalNode(lambda: restored).memory_index([str(docs_folder(memory))])
        assert resync["files"]["unchanged"] == 2 and every_crystal(restored) == expected  # nothing to redo
        assert top10(restored) == before
        assert {hit.crystal.id: hit.to_dict()["origin"] for hit in restored.search(
            SearchRequest("charity race", namespaces=(), record_access=False))} == origins
        assert restored.index.count == memory.index.count

        again = import_path(restored, path)  # twice adds nothing
        assert again["imported"] == 0 and again["already_stored"] == result["memories"]
        assert every_crystal(restored) == expected
    finally:
        restored.close()
    reopened = open_memory(tmp_path / "restored")  # the index was saved: nothing to rebuild
    try:
        assert top10(reopened) == before
    finally:
        reopened.close()


def test_another_embedder_re_embeds_with_the_real_minilm(source: tuple[Memory, dict[str, str]],
                                                        tmp_path: Path) -> None:
    memory, ids = source
    export_to_path(memory, tmp_path / "memory.jsonl")
    minilm = open_memory(tmp_path / "minilm", "minilm")
    try:
        result = import_path(minilm, tmp_path / "memory.jsonl")
        assert result["vectors"] == f"re-embedded with {minilm.embedder.name}" and result["embedded"] == result["imported"] > 0
        stored = minilm.store.get(ids["second"], with_embedding=True)
        assert stored.embedding is not None
        own = minilm.embed([stored.text])[0]
        assert float(np.dot(np.asarray(stored.embedding), own)) > 0.99  # MiniLM's vector, not the file's
        hit = minilm.search(SearchRequest("where is the deploy checklist now", namespaces=(),
                                          record_access=False))[0]
        assert hit.crystal.id == ids["second"]
        assert minilm.index.count == result["imported"]
    finally:
        minilm.close()


def _rewrite(path: Path, change: Any) -> bytes:
    lines = path.read_bytes().splitlines()
    return b"\n".join(change(lines)) + b"\n"


def _record(lines: list[bytes], index: int, edit: Any) -> list[bytes]:
    record = json.loads(lines[index])
    edit(record)
    return [*lines[:index], json.dumps(record).encode(), *lines[index + 1:]]


def _header(lines: list[bytes], edit: Any) -> list[bytes]:
    return _record(lines, 0, edit)


HOSTILE = {
    "deep line": lambda lines: [*lines[:2], b"[" * 100_000 + b"]" * 100_000, *lines[3:]],
    "huge line": lambda lines: [*lines[:2], b'{"crystal": "' + b"x" * (5 * 1024 * 1024) + b'"}', *lines[3:]],
    "not base64": lambda lines: _record(lines, 1, lambda r: r.update(vector="@@not base64@@")),
    "vector of the wrong dimension": lambda lines: _record(lines, 1, lambda r: r.update(
        vector=base64.b64encode((np.ones(10, dtype=np.float32) / np.float32(np.sqrt(10))).tobytes()).decode())),
    "vector not of unit length": lambda lines: _record(lines, 1, lambda r: r.update(
        vector=base64.b64encode(np.full(384, 7.0, dtype=np.float32).tobytes()).decode())),
    "duplicate id": lambda lines: [*lines[:-1], lines[1]],
    "unknown version": lambda lines: _header(lines, lambda h: h.update(version=2)),
    "cut short": lambda lines: lines[:-3],
    "text not matching its hash": lambda lines: _record(lines, 2, lambda r: r["crystal"].update(text="forged")),
    "lone surrogate": lambda lines: [*lines[:3], lines[3].replace(b'"text":"', b'"text":"\\ud800', 1), *lines[4:]],
    "integer past 64 bits": lambda lines: _record(lines, 1, lambda r: r["crystal"].update(accessCount=2**70)),
    "string where a time belongs": lambda lines: _record(lines, 1, lambda r: r["crystal"].update(
        lastAccessedAt="yesterday")),
    "unknown enum": lambda lines: _record(lines, 1, lambda r: r["crystal"].update(semanticType="gossip")),
    "bad namespace": lambda lines: _record(lines, 1, lambda r: r["crystal"].update(namespace="../../etc")),
    "turn row without its session": lambda lines: _record(
        lines, 1, lambda r: r["turn"].pop("session")),
    "not json": lambda lines: [*lines[:2], b"{this is not json", *lines[3:]],
    "insight row without its kind": lambda lines: _record(
        lines, next(i for i, line in enumerate(lines) if b'"insight"' in line),
        lambda r: r["insight"].pop("kind")),
    "chunk row of the wrong shape": lambda lines: _record(
        lines, next(i for i, line in enumerate(lines) if b'"chunk"' in line),
        lambda r: r["chunk"].update(start_line="ten")),
}


REFUSED_AS = {
    "deep line": "too_deep", "huge line": "too_long", "not base64": "bad_vector",
    "vector of the wrong dimension": "bad_vector", "vector not of unit length": "bad_vector",
    "duplicate id": "duplicate_id", "unknown version": None, "cut short": "count",
    "text not matching its hash": "bad_hash", "lone surrogate": "not_json", "integer past 64 bits": "bad_crystal",
    "string where a time belongs": "bad_crystal", "unknown enum": "bad_crystal", "bad namespace": "bad_crystal",
    "turn row without its session": "bad_turn", "not json": "not_json",
    "chunk row of the wrong shape": "bad_chunk", "insight row without its kind": "bad_insight",
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_export_is_refused_whole(source: tuple[Memory, dict[str, str]], tmp_path: Path,
                                           attack: str) -> None:
    memory, _ = source
    export_to_path(memory, tmp_path / "memory.jsonl")
    assert b'"turn"' in (tmp_path / "memory.jsonl").read_bytes().splitlines()[1]  # line 1 is a turn
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(_rewrite(tmp_path / "memory.jsonl", HOSTILE[attack]))

    target = open_memory(tmp_path / "target")
    try:
        target.add("something already here")
        unchanged = state(target)
        with pytest.raises(ImportRefused) as refused:
            import_path(target, hostile)
        kind = REFUSED_AS[attack]
        assert refused.value.errors == ({kind: 1} if kind else {}), str(refused.value)
        assert state(target) == unchanged
    finally:
        target.close()


def test_errors_are_counted_by_kind(source: tuple[Memory, dict[str, str]], tmp_path: Path) -> None:
    memory, _ = source
    export_to_path(memory, tmp_path / "memory.jsonl")
    lines = (tmp_path / "memory.jsonl").read_bytes().splitlines()
    bad = [lines[0], b"[" * 50 + b"]" * 50, b"[" * 50 + b"]" * 50, lines[1], lines[1], *lines[2:]]
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(bad) + b"\n")
    target = open_memory(tmp_path / "target")
    try:
        with pytest.raises(ImportRefused) as refused:
            import_path(target, tmp_path / "bad.jsonl")
        assert refused.value.errors == {"too_deep": 2, "duplicate_id": 1}
        assert "line 2" in str(refused.value)
        assert state(target)[0] == 0
    finally:
        target.close()


def test_a_memory_only_partly_here_is_skipped_not_merged(source: tuple[Memory, dict[str, str]],
                                                         tmp_path: Path) -> None:
    memory, ids = source
    export_to_path(memory, tmp_path / "memory.jsonl")
    target = open_memory(tmp_path / "target")
    try:
        import_path(target, tmp_path / "memory.jsonl")
        with target.db.transaction() as conn:  # one version of a two-version memory goes missing
            conn.execute("DELETE FROM crystals WHERE id=?", (ids["second"],))
        crystals = state(target)[0]
        result = import_path(target, tmp_path / "memory.jsonl")
        assert result["conflicts"] == 1 and result["imported"] == 0
        assert state(target)[0] == crystals
    finally:
        target.close()
