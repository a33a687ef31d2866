"""What the user said stays; what nobody visits still decays (issue 35, delivery 1).

Seed 001's example scratch notes go through the real working-memory ``note`` on a real
data dir, then 90 simulated idle days of consolidation (hourly for two days, then daily)
under both policies (``memory.policy``): every note is still found by search, while an
ordinary memory added beside them expires as seed 000 / 004 say. Time moves by hand
(``tests/support/clock.HandClock`` for the notes, ``consolidate(now=…)`` for the cycles).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from node.config import NodeConfig, load_config
from node.crystals import Lifecycle, LifespanPolicy, SemanticType
from node.memory import MemoryBackend, WorkingMemory, consolidate_at, set_lifespan
from node.memory.facade import Memory, MemoryInputError
from node.memory.requests import consolidation_time, parse_add_request
from node.memory.search.pipeline import SearchRequest
from node.memory.versions import add_with_outcome
from tests.support.clock import HandClock

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
T0 = 1_773_325_800_000  # 2026-03-12T14:30:00Z, the seed's first note

# Seed 001's scratch buffer ("Douglas" in the seed; the issue's measurement used "Priya").
SEED_NOTES = [
    (0.8, "User's name is Priya, prefers tabs over spaces", "what is the user's name"),
    (0.7, "Project deadline is March 20th for the API migration", "when is the API migration deadline"),
    (0.9, "User explicitly asked to never use semicolons in JS", "semicolons in JS"),
]
ORDINARY = "the coffee machine on the third floor was descaled on a tuesday"


def config(tmp_path: Path, policy: str) -> NodeConfig:
    return load_config(tmp_path / policy, environ={},
                       overrides={"memory": {"embedder": "hashing", "policy": policy}})


def idle_days(memory: Memory, days: int, start: int = T0) -> None:
    """Consolidation cycles with nobody reading: hourly for two days (energy forgets within
    hours), then daily."""
    times = [start + h * HOUR_MS for h in range(1, 48)] + [start + d * DAY_MS for d in range(2, days + 1)]
    for at in times:
        memory.consolidate(now=at)


def noted(memory: Memory, tmp_path: Path) -> list[str]:
    clock = HandClock(T0)
    working = WorkingMemory(tmp_path / "wm", MemoryBackend(memory), clock=clock)
    ids = []
    for minutes, (importance, text, _) in enumerate(SEED_NOTES):
        clock.now = T0 + minutes * 15 * 60_000
        result = working.note(text, importance)
        assert result.crystal_status == "indexed"
        ids.append(str(result.crystal_id))
    return ids


@pytest.mark.parametrize("policy", ["importance", "energy"])
def test_seed_001_notes_are_found_after_90_idle_days_and_ordinary_memory_still_decays(
        tmp_path: Path, policy: str) -> None:
    memory = Memory(config(tmp_path, policy))
    try:
        ids = noted(memory, tmp_path)
        ordinary = memory.add(ORDINARY, created_at_ms=T0).id
        idle_days(memory, 90)
        # Decay still works: the memory nobody noted or visited is gone (day ~37 / hour ~5).
        assert memory.store.get(ordinary).lifecycle is Lifecycle.EXPIRED
        for crystal_id, (importance, text, question) in zip(ids, SEED_NOTES, strict=True):
            kept = memory.store.get(crystal_id)
            assert kept.lifecycle is not Lifecycle.EXPIRED, (policy, text)
            assert kept.governance.importance_floor == importance
            if policy == "importance":
                assert kept.importance_score >= importance  # the importance the user gave is a floor
            hits = memory.search(SearchRequest(question, k=3, record_access=False))
            assert crystal_id in [hit.crystal.id for hit in hits], (policy, question)
    finally:
        memory.close()


def test_an_auto_note_is_the_hormones_guess_and_decays(tmp_path: Path) -> None:
    memory = Memory(config(tmp_path, "importance"))
    try:
        working = WorkingMemory(tmp_path / "wm", MemoryBackend(memory), clock=HandClock(T0))
        auto = working.note("[AUTO] Hormonal event: dopamine spike (achievement detected)", 0.8)
        crystal = memory.store.get(str(auto.crystal_id))
        assert crystal.governance.importance_floor is None
        idle_days(memory, 60)
        assert memory.store.get(crystal.id).lifecycle is Lifecycle.EXPIRED
    finally:
        memory.close()


# --- memory add --importance / --lifespan permanent, pin and unpin ---------------------------


@pytest.mark.parametrize("policy", ["importance", "energy"])
def test_explicit_importance_and_a_pin_outlast_90_idle_days_and_unpin_lets_go(tmp_path: Path, policy: str) -> None:
    memory = Memory(config(tmp_path, policy))
    try:
        explicit = add_with_outcome(memory, {"text": "the user's daughter is called Mira",
                                             "importance": 0.6}).crystal
        permanent = add_with_outcome(memory, {"text": "the office wifi is called cm-guest",
                                              "lifespan": "permanent"}).crystal
        pinned = memory.add("the staging database lives on db-stage-02", created_at_ms=T0)
        unpinned = memory.add("the old build server was build-03", created_at_ms=T0)
        for crystal in (explicit, permanent):
            memory.store.db.execute("UPDATE crystals SET created_at_ms=? WHERE id=?", (T0, crystal.id))
        assert set_lifespan(memory, pinned.id, "permanent")["changed"] is True
        assert set_lifespan(memory, pinned.id, "permanent")["changed"] is False  # nothing to do twice
        set_lifespan(memory, unpinned.id, "permanent")
        assert set_lifespan(memory, unpinned.id, "decay")["changed"] is True
        idle_days(memory, 90)
        for crystal in (explicit, permanent, pinned):
            assert memory.store.get(crystal.id).lifecycle is not Lifecycle.EXPIRED, crystal.text
        assert memory.store.get(unpinned.id).lifecycle is Lifecycle.EXPIRED
        actions = [row["action"] for row in memory.store.audit_log(pinned.id, 50)]
        assert "pinned" in actions
        assert "unpinned" in [row["action"] for row in memory.store.audit_log(unpinned.id, 50)]
    finally:
        memory.close()


def test_pinning_a_forgotten_memory_brings_it_back(memory: Memory) -> None:
    forgotten = memory.add("the printer on floor two jams on A3 paper", created_at_ms=T0)
    memory.consolidate(now=T0 + 60 * DAY_MS)
    assert memory.store.get(forgotten.id).lifecycle is Lifecycle.EXPIRED
    back = set_lifespan(memory, forgotten.id, "permanent")
    assert back["lifecycle"] == "generated" and back["governance"]["lifespanPolicy"] == "permanent"
    memory.consolidate(now=T0 + 400 * DAY_MS)
    assert memory.store.get(forgotten.id).lifecycle is Lifecycle.GENERATED


def test_an_update_keeps_the_pin_and_the_floor(memory: Memory) -> None:
    from node.memory.versions import update

    first = add_with_outcome(memory, {"text": "the deploy window is friday 14:00", "importance": 0.8,
                                      "lifespan": "permanent"}).crystal
    second = update(memory, first.id, "the deploy window is friday 15:00")
    assert second.governance.lifespan_policy is LifespanPolicy.PERMANENT
    assert second.governance.importance_floor == 0.8


@pytest.mark.parametrize("body, message", [
    ({"importance": "0.9"}, "importance must be a number"),
    ({"importance": True}, "importance must be a number"),
    ({"importance": 1.5}, "importance must be a number"),
    ({"importance": float("nan")}, "importance must be a number"),
    ({"lifespan": "forever"}, "lifespan must be one of"),
    ({"lifespan": "ttl"}, "lifespan must be one of"),
    ({"lifespan": ["permanent"]}, "lifespan must be one of"),
    ({"lifespan": "permanent", "ttl_ms": 60_000}, "not both"),
])
def test_a_crafted_add_is_refused_and_nothing_is_stored(memory: Memory, body: dict, message: str) -> None:  # type: ignore[type-arg]
    before = memory.store.stats()["total"]
    with pytest.raises(MemoryInputError, match=message):
        add_with_outcome(memory, {"text": "remember the milk"} | body)
    assert memory.store.stats()["total"] == before
    with pytest.raises(MemoryInputError):
        parse_add_request({"text": "x"} | body)


def test_pin_refuses_what_it_cannot_pin(memory: Memory) -> None:
    crystal = memory.add("the backup runs at 02:00", ttl_ms=DAY_MS)
    with pytest.raises(MemoryInputError, match="TTL"):
        set_lifespan(memory, crystal.id, "decay")
    with pytest.raises(MemoryInputError, match="lifespan must be"):
        set_lifespan(memory, crystal.id, "ttl")
    pinned = set_lifespan(memory, crystal.id, "permanent")  # a pin outranks the TTL
    assert pinned["governance"]["ttlMs"] is None and pinned["expiresAt"] is None


def test_a_tampered_floor_in_the_store_is_ignored(memory: Memory) -> None:
    crystal = memory.add("the lunch order goes in before eleven", created_at_ms=T0)
    governance = crystal.governance.to_dict() | {"importanceFloor": "immortal"}
    memory.store.db.execute("UPDATE crystals SET governance_json=? WHERE id=?", (json.dumps(governance), crystal.id))
    memory.consolidate(now=T0 + 60 * DAY_MS)  # no exception, and no accidental immortality
    assert memory.store.get(crystal.id).lifecycle is Lifecycle.EXPIRED


# --- consolidate --at / --dry-run ---------------------------------------------------------------


def counts(memory: Memory) -> dict[str, object]:
    one = memory.store.db.execute
    return {
        "crystals": one("SELECT lifecycle, importance_score, access_count FROM crystals ORDER BY id").fetchall(),
        "audit": one("SELECT COUNT(*) FROM memory_audit_log").fetchone()[0],
        "energy": one("SELECT * FROM memory_energy ORDER BY crystal_id").fetchall(),
        "knowledge": one("SELECT * FROM knowledge ORDER BY crystal_id").fetchall(),
        "meta": one("SELECT * FROM meta ORDER BY key").fetchall(),
    }


@pytest.mark.parametrize("policy", ["importance", "energy"])
def test_a_dry_run_writes_nothing_and_names_what_the_real_run_forgets(tmp_path: Path, policy: str) -> None:
    memory = Memory(config(tmp_path, policy))
    try:
        ids = noted(memory, tmp_path)
        ordinary = memory.add(ORDINARY, created_at_ms=T0).id
        for i in range(3):  # episodes fold into a fact in a real run, not in a dry one
            memory.add(f"the nightly backup of the users table failed again, run {i}",
                       semantic_type=SemanticType.EPISODE, created_at_ms=T0)
        before = counts(memory)
        now = T0 + HOUR_MS
        preview = consolidate_at(memory, "+90d", dry_run=True, now=now)
        assert counts(memory) == before
        assert preview.dry_run and preview.at_ms == now + 90 * DAY_MS
        forgotten = {item["id"]: item for item in preview.forgotten}
        assert ordinary in forgotten and forgotten[ordinary]["text"] == ORDINARY
        assert not set(ids) & set(forgotten)  # the notes would be kept
        real = consolidate_at(memory, "+90d", now=now)
        assert not real.dry_run
        assert {item["id"] for item in real.forgotten} >= set(forgotten)
        assert memory.store.get(ordinary).lifecycle is Lifecycle.EXPIRED
        assert counts(memory) != before
    finally:
        memory.close()


def test_consolidation_time_reads_relative_and_iso_times_and_refuses_the_rest() -> None:
    now = T0
    assert consolidation_time(None, now) == now
    assert consolidation_time("+90d", now) == now + 90 * DAY_MS
    assert consolidation_time("+12h", now) == now + 12 * HOUR_MS
    assert consolidation_time("2026-06-10", now) == 1_781_049_600_000
    assert consolidation_time("2026-06-10T12:00:00+02:00", now) == 1_781_085_600_000
    for bad in ("2020-01-01", "-5d", "+5w", "+9999999d", "tomorrow", "", 90, ["+1d"], "9" * 41, "+4000d"):
        with pytest.raises(MemoryInputError):
            consolidation_time(bad, now)


def test_purge_and_dry_run_together_are_refused(memory: Memory) -> None:
    with pytest.raises(MemoryInputError, match="not both"):
        consolidate_at(memory, "+1d", purge=True, dry_run=True)


def test_noting_what_is_already_stored_makes_it_last(memory: Memory, tmp_path: Path) -> None:
    gathered = memory.add("the user's dentist appointment is on the 3rd", created_at_ms=T0)  # e.g. ingested
    working = WorkingMemory(tmp_path / "wm", MemoryBackend(memory), clock=HandClock(T0))
    again = working.note("the user's dentist appointment is on the 3rd", 0.8)
    assert (again.crystal_id, again.crystal_status, again.held) == (gathered.id, "exists", True)
    assert working.note("the user's dentist appointment is on the 3rd", 0.5).held is False  # never lowered
    assert "held" in [row["action"] for row in memory.store.audit_log(gathered.id, 20)]
    memory.consolidate(now=T0 + 90 * DAY_MS)
    kept = memory.store.get(gathered.id)
    assert kept.lifecycle is not Lifecycle.EXPIRED and kept.importance_score >= 0.8
