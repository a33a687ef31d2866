"""Working memory on a real store: a scripted agent session, dreams, guards, migration (seed 001)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from node.config import NodeConfig
from node.crystals.model import SemanticType, now_ms
from node.market.ledger import MarketLedger, Sale
from node.market.selling.niche import niche_data
from node.memory.facade import Memory, MemoryInputError, SearchRequest
from node.memory.learning import Candidate
from node.memory.working.backend import MemoryBackend
from node.memory.working.dream.inputs import Classified, SearchFn, Synthesis, SynthesisInput
from node.memory.working.state import SECTIONS, parse_state, render_state
from node.memory.working.working import WorkingMemory

DAY_MS = 86_400_000
PAST = [
    "We spent 3 hours debugging a CORS error on the P2P bridge; fixed by tweaking EigenTrust "
    "peer scoring thresholds",
    "Workspace migration to WSL2: repositories moved to ext4 and node_modules rebuilt",
    "Nightly backup job writes to bucket acme-backups-eu with 30 day retention",
    "Grafana board for db-prod-07 tracks p99 latency of the billing queries",
]


def working(memory: Memory, config: NodeConfig, **kwargs: object) -> WorkingMemory:
    return WorkingMemory(config.data_dir, MemoryBackend(memory),
                         niche=lambda: niche_data(memory.db), **kwargs)  # type: ignore[arg-type]


def text_count(memory: Memory, text: str) -> int:
    return int(memory.db.one("SELECT COUNT(*) FROM crystals WHERE text=?", (text,))[0])


def sell(memory: Memory, buyer: str, price: int) -> None:
    at = now_ms()
    MarketLedger(memory.db).record_sale(Sale(
        f"req-{buyer}-{price}", "listing-1", "crystal-1", "skill-ci", buyer, "0x" + "ab" * 20, price,
        None, "settled", "0x" + "cd" * 32, None, at, at))


def scripted_session(memory: Memory, wm: WorkingMemory) -> dict[str, str]:
    """Notes, searches, skill executions and a hormonal spike, as an agent would produce them."""
    old = now_ms() - 3 * DAY_MS
    for text in PAST:
        memory.add(text, created_at_ms=old)
    words = ["backup", "migration", "latency", "bucket", "cluster", "retention", "board", "queries"]
    for i in range(60):  # routine memories sharing the vocabulary: pointers must be specific
        memory.add(f"Routine log {i}: the {words[i % 8]} job on worker {i} finished the "
                   f"{words[(i + 3) % 8]} step for the {words[(i + 5) % 8]} service",
                   created_at_ms=old - DAY_MS)
    notes = {
        "bond": "User's name is Douglas, prefers tabs over spaces",
        "deadline": "Project deadline is March 20th for the API migration",
        "never": "User explicitly asked to never use semicolons in JS",
        "gap": "Not sure why the arm64 runner times out on integration tests?",
    }
    for text in notes.values():
        wm.note(text, 0.8)
    pattern = memory.add("Refactor TypeScript modules into smaller files with barrel exports",
                         semantic_type=SemanticType.TASK_PATTERN)
    for _ in range(3):
        memory.record_execution(pattern.id, True, 0.9)
    for _ in range(2):
        memory.search(SearchRequest("TypeScript barrel exports refactor", 1))
    skill = memory.add("Triage a flaky CI job: rerun it three times, diff the environments",
                       semantic_type=SemanticType.SKILL, skill_category="ci")
    for success in (True, True, False):
        memory.record_execution(skill.id, success, 0.8)
    sell(memory, "buyer-a", 20_000)
    sell(memory, "buyer-b", 30_000)
    memory.hormones.spike("achievement")
    memory.hormones.spike("achievement")
    auto = wm.auto_scratch()
    assert auto and auto[0].note.text.startswith("[AUTO] Hormonal event: dopamine spike")
    notes["pattern"] = pattern.id
    return notes


def test_scripted_session_then_dream_fills_all_seven_sections(memory: Memory, node_config: NodeConfig) -> None:
    wm = working(memory, node_config)
    notes = scripted_session(memory, wm)
    pending = wm.pending_notes()
    assert any(note.auto and "dopamine spike" in note.text for note in pending)

    result = wm.dream()

    assert result.status == "written", result
    text = wm.state_path.read_text()
    parsed = parse_state(text)
    for key, heading in SECTIONS:
        assert parsed.bullets(key), f"{heading} is empty:\n{text}"
    assert "Douglas" in parsed.sections["bond"]
    assert "0.050000 USDC" in parsed.sections["niche"] and "Unique buyers: 2" in parsed.sections["niche"]
    assert "March 20th" in parsed.sections["active"]
    assert "Breakthrough" in parsed.sections["active"]
    assert "arm64" in parsed.sections["gaps"]
    assert notes["pattern"][:8] in parsed.sections["skills"]
    assert "Practises 1 skill(s) in ci, 67% success over 3 runs" in parsed.sections["phenotype"]
    # crystal pointers: each one's keywords retrieve its source crystal through Memory.search
    assert result.pointers and all(p["source_ids"] for p in result.pointers)
    assert len(parsed.bullets("pointers")) == len(result.pointers)
    for pointer in result.pointers:
        assert f"search: `{pointer['keywords']}`" in text
        hits = memory.search(SearchRequest(pointer["keywords"], 5, record_access=False))
        assert pointer["source_ids"][0] in [hit.crystal.id for hit in hits], pointer
    # the scratch is cleared and every consumed note is one searchable crystal
    assert wm.pending_notes() == []
    for note in [n for n in notes.values() if n != notes["pattern"]]:
        assert text_count(memory, note) == 1
        hits = memory.search(SearchRequest(note, 3, record_access=False))
        assert hits and hits[0].crystal.text == note


def test_a_second_dream_updates_the_state_and_keeps_pointers(memory: Memory, node_config: NodeConfig) -> None:
    wm = working(memory, node_config)
    scripted_session(memory, wm)
    first = wm.dream()
    wm.note("User said thanks: the migration plan helped the team a lot", 0.9)
    second = wm.dream()
    assert second.status == "written"
    bond = parse_state(wm.state_path.read_text()).sections["bond"]
    assert "migration plan helped" in bond and "Douglas" in bond  # fresh line first, old lines kept
    assert {p["topic"] for p in first.pointers} <= {p["topic"] for p in second.pointers}


class FixedSynthesiser:
    """A pluggable synthesiser that returns a chosen text (to drive the collapse guards)."""

    name = "fixed"

    def __init__(self, text: str) -> None:
        self.text = text

    def synthesise(self, data: SynthesisInput, search: SearchFn) -> Synthesis:
        return Synthesis(self.text, self.name)

    def classify(self, candidates: Sequence[Candidate]) -> Classified:
        return Classified("rules")


FULL = {key: f"- a real line about {key} with enough substance" for key, _ in SECTIONS}


def mature_state() -> str:
    text = render_state({**FULL, "active": "\n".join(f"- ongoing item {i} " + "x" * 60 for i in range(40))},
                        "2026-03-12T16:00:00Z", "calm")
    assert len(text) > 2000
    return text


@pytest.mark.parametrize("new_text,reason", [
    (render_state(FULL, "2026-03-12T17:00:00Z", "calm"), "mass drop"),
    (render_state({**FULL, "pointers": "\n".join(f"- Past: t{i} → search: `alpha{i} beta`" for i in range(21)),
                   "active": "\n".join(f"- ongoing item {i} " + "x" * 60 for i in range(40))},
                  "2026-03-12T17:00:00Z", "calm"), "eviction runaway"),
    (render_state({key: "" for key, _ in SECTIONS}, "2026-03-12T17:00:00Z", "calm") + "<!--" + " " * 3000,
     "empty synthesis"),
])
def test_each_collapse_guard_rejects_and_changes_nothing(
        memory: Memory, node_config: NodeConfig, new_text: str, reason: str) -> None:
    wm = working(memory, node_config, synthesiser=FixedSynthesiser(new_text))
    wm.scratch.directory.mkdir(parents=True)
    wm.state_path.write_text(mature_state())
    wm.note("User prefers dark mode", 0.7)
    before_state, before_scratch = wm.state_path.read_bytes(), wm.scratch.path.read_bytes()

    result = wm.dream()

    assert result.status == "rejected" and result.reason and result.reason.startswith(reason)
    assert wm.state_path.read_bytes() == before_state
    assert wm.scratch.path.read_bytes() == before_scratch
    rejection = json.loads(memory.store.get_meta("working_memory:default:last_rejection") or "{}")
    assert rejection["reason"] == result.reason


def test_seed_migration_keeps_a_hand_written_memory(memory: Memory, node_config: NodeConfig) -> None:
    hand = "# My MEMORY.md\n\n" + "\n".join(
        f"- Fact {i}: the staging cluster stg-{i:02d} runs kernel 6.{i}" for i in range(60))
    wm = working(memory, node_config)
    wm.scratch.directory.mkdir(parents=True)
    wm.state_path.write_text(hand)

    result = wm.dream()

    assert result.status == "written"
    assert wm.backup_path.read_text() == hand
    text = wm.state_path.read_text()
    assert text.startswith(hand) and "## Dream-Generated" in text and "# Working Memory State" in text
    seeded = memory.store.list_crystals(limit=100)
    chunks = [c for c in seeded if c.path == "memory/default/MEMORY.md"]
    assert len(chunks) >= 2
    assert {(c.lifecycle.value, c.importance_score) for c in chunks} == {("consolidated", 0.75)}
    flag = json.loads(memory.store.get_meta("working_memory:default:seeded") or "{}")
    assert flag["migrated"] and flag["chunks"] == len(chunks)
    # run-once: a second activation and dream neither re-chunk nor drop the hand-written text
    assert wm.activate()["migrated"] is False
    wm.note("User wants weekly summaries", 0.7)
    assert wm.dream().status == "written"
    assert wm.state_path.read_text().startswith(hand)
    assert len([c for c in memory.store.list_crystals(limit=200) if c.path == "memory/default/MEMORY.md"]) == len(chunks)


def test_scheduled_dream_waits_for_min_chunks(memory: Memory, node_config: NodeConfig) -> None:
    wm = working(memory, node_config, min_chunks=5)
    for i in range(4):
        wm.note(f"small thing number {i} worth keeping", 0.5)
    assert wm.dream(force=False).status == "skipped"
    assert len(wm.pending_notes()) == 4 and not wm.state_path.exists()
    wm.note("the fifth thing tips it over", 0.5)
    assert wm.dream(force=False).status == "written"
    assert wm.pending_notes() == []


def test_auto_scratch_only_on_spikes_and_does_not_feed_itself(memory: Memory, node_config: NodeConfig) -> None:
    wm = working(memory, node_config)
    assert wm.auto_scratch() == []
    memory.add("The deploy crashed with a database error on the release branch")
    memory.hormones.spike("error")
    memory.hormones.spike("urgency")
    levels = dict(memory.hormones.levels)
    notes = wm.auto_scratch()
    assert [n.note.text[:44] for n in notes] == ["[AUTO] Hormonal event: cortisol spike (frict"]
    assert notes[0].note.importance == 0.8 and notes[0].crystal_id
    assert "deploy crashed" in notes[0].note.text
    assert memory.hormones.levels == pytest.approx(levels, abs=1e-3)  # decay by the clock only: no spike fed back


def test_crystallize_an_emerging_skill(memory: Memory, node_config: NodeConfig) -> None:
    wm = working(memory, node_config)
    notes = scripted_session(memory, wm)
    backend = MemoryBackend(memory)
    skill = backend.crystallize(notes["pattern"][:8], category="refactoring", tags=["typescript"])
    assert skill.semantic_type is SemanticType.SKILL and skill.text.startswith("Skill: Refactor")
    assert (skill.execution.executions, skill.execution.successes) == (3, 3)
    assert skill.provenance_dag[0].parent_ids == [notes["pattern"]]
    assert skill.governance.access_scope.value == "shared"
    with pytest.raises(MemoryInputError, match="already exists"):
        backend.crystallize(notes["pattern"])
    with pytest.raises(MemoryInputError, match="only live task patterns"):
        backend.crystallize(skill.id)


def test_concurrent_notes_from_threads_all_land_whole(memory: Memory, node_config: NodeConfig) -> None:
    from concurrent.futures import ThreadPoolExecutor

    wm = working(memory, node_config)
    texts = [f"thread note {i} about subsystem-{i % 7}" for i in range(48)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda t: wm.note(t, 0.6), texts))
    contents = wm.scratch.read()
    assert sorted(n.text for n in contents.notes) == sorted(texts)
    assert not contents.corrupt and all(r.crystal_status == "indexed" for r in results)
    assert all(text_count(memory, t) == 1 for t in texts)


def test_an_unsound_journal_is_set_aside(memory: Memory, node_config: NodeConfig, tmp_path: Path) -> None:
    wm = working(memory, node_config)
    wm.note("before the forged journal", 0.7)
    before = wm.scratch.path.read_bytes()
    wm.journal_path.write_text(json.dumps({"sha256": "00" * 32, "journal": json.dumps(
        {"state": "# pwned", "consumed": [], "dream_ms": 1})}))
    wm.note("after the forged journal", 0.7)
    assert not wm.journal_path.exists() and wm.journal_path.with_name("dream.journal.rejected").exists()
    assert not wm.state_path.exists()
    assert wm.scratch.path.read_bytes().startswith(before)


def test_hostile_files_are_refused_not_followed(memory: Memory, node_config: NodeConfig, tmp_path: Path) -> None:
    from node.errors import CrystalmeshError

    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    wm = working(memory, node_config)
    wm.scratch.directory.mkdir(parents=True)
    wm.scratch.path.symlink_to(outside)
    with pytest.raises(CrystalmeshError, match="symlink"):
        wm.note("must not land outside", 0.7)
    assert outside.read_text() == "untouched\n"
    wm.scratch.path.unlink()

    wm.state_path.write_bytes(b"# Working Memory State\n" + b"x" * (2 * 1024 * 1024))
    with pytest.raises(CrystalmeshError, match="more than the"):
        wm.context(200_000)
    wm.state_path.unlink()

    wm.journal_path.write_bytes(b"{" * (5 * 1024 * 1024))
    assert wm.note("after an oversize journal", 0.7).crystal_status == "indexed"
    assert wm.journal_path.with_name("dream.journal.rejected").exists()

    other = tmp_path / "elsewhere"
    other.mkdir()
    (node_config.data_dir / "memory" / "agent:evil").symlink_to(other, target_is_directory=True)
    with pytest.raises(CrystalmeshError, match="symlink"):
        WorkingMemory(node_config.data_dir, MemoryBackend(memory, namespace="agent:evil"),
                      "agent:evil").note("x", 0.5)
    assert list(other.iterdir()) == []


def test_namespaces_keep_working_memories_apart(memory: Memory, node_config: NodeConfig) -> None:
    default = working(memory, node_config)
    planner = WorkingMemory(node_config.data_dir, MemoryBackend(memory, namespace="agent:planner"),
                            "agent:planner")
    shared_text = "Standup moved to 9:30"
    mine = default.note(shared_text, 0.7)
    theirs = planner.note(shared_text, 0.7)
    planner.note("Planner-only: the roadmap review is on Thursday", 0.8)
    assert mine.crystal_id != theirs.crystal_id
    assert memory.store.get(theirs.crystal_id or "").namespace == "agent:planner"
    assert planner.scratch.path == node_config.data_dir / "memory" / "agent:planner" / "scratch.md"
    assert default.dream().status == "written"
    assert "roadmap review" not in default.state_path.read_text()
    assert [n.text for n in planner.pending_notes()] == [shared_text, "Planner-only: the roadmap review is on Thursday"]
    with pytest.raises(ValueError, match="backend"):
        WorkingMemory(node_config.data_dir, MemoryBackend(memory), "agent:planner")


def test_a_repeated_note_writes_nothing(memory: Memory, node_config: NodeConfig) -> None:
    from node.crystals.model import AccessScope
    from node.memory.working.backend import NoteKind

    wm = working(memory, node_config)
    first = wm.note("User prefers dark mode", 0.7, NoteKind(SemanticType.PREFERENCE))
    before = wm.scratch.path.read_bytes()
    again = wm.note("User  prefers\ndark mode", 0.9, NoteKind(SemanticType.PREFERENCE, AccessScope.PUBLIC))
    assert again.crystal_status == "exists" and again.crystal_id == first.crystal_id
    assert again.differs == {"scope": {"stored": "private", "requested": "public"}}
    assert wm.scratch.path.read_bytes() == before and text_count(memory, "User prefers dark mode") == 1
