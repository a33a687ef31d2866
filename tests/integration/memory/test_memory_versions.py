"""Memories as versioned records in namespaces, on a real data dir (SQLite + HNSW):
update/delete/history, add outcomes, namespaces that never mix, TTL at read time."""

from __future__ import annotations

import pytest

from node.crystals.model import AccessScope, SemanticType, now_ms
from node.crystals.store import CrystalNotFound
from node.crystals.versions import MemorySuperseded
from node.memory import versions
from node.memory.facade import Memory, MemoryInputError, SearchRequest
from node.memory.namespaces import InvalidNamespace

FACT = "The staging cluster runs in eu-west-3"
MOVED = "The staging cluster runs in eu-central-1 since June"


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.crystal.id for hit in hits]


def add(memory: Memory, text: str, **body: object) -> versions.AddOutcome:
    return versions.add_with_outcome(memory, {"text": text, **body})


def test_update_closes_the_old_version_and_history_shows_both(memory: Memory) -> None:
    first = add(memory, FACT, type="fact").crystal
    second = versions.update(memory, first.id, MOVED)
    assert (second.memory_id, second.version, second.namespace) == (first.id, 2, "default")
    assert second.provenance_dag[0].operation.value == "mutated"
    assert second.provenance_dag[0].parent_ids == [first.id]
    old = memory.get(first.id)  # a closed version stays readable, marked as such
    assert old.valid_to_ms == second.created_at_ms and old.superseded_by == second.id
    assert ids(memory.search(SearchRequest("staging cluster"))) == [second.id]

    history = versions.history(memory, second.id)
    assert history == versions.history(memory, first.id)  # any version names the memory
    assert [v["id"] for v in history["versions"]] == [first.id, second.id]
    assert [v["validTo"] for v in history["versions"]] == [second.created_at_ms, None]
    assert [t["action"] for t in history["transitions"]] == ["created", "superseded", "updated"]

    third = versions.update(memory, first.id, scope=AccessScope.SHARED)  # via an old id: the current
    assert third.version == 3 and third.text == MOVED and third.governance.access_scope is AccessScope.SHARED
    with pytest.raises(MemorySuperseded):
        memory.store.supersede(second.id, third)  # a stale writer cannot fork the chain
    with pytest.raises(MemoryInputError, match="nothing to change"):
        versions.update(memory, third.id, MOVED)


def test_updating_back_to_an_old_text_is_a_new_version(memory: Memory) -> None:
    first = add(memory, FACT).crystal
    versions.update(memory, first.id, MOVED)
    back = versions.update(memory, first.id, FACT)
    assert back.version == 3 and back.text == FACT
    assert ids(memory.search(SearchRequest("staging cluster"))) == [back.id]


def test_delete_tombstones_every_version_and_consolidation_purges(memory: Memory) -> None:
    first = add(memory, FACT).crystal
    second = versions.update(memory, first.id, MOVED)
    kept = add(memory, "The staging cluster has three nodes").crystal
    result = versions.delete(memory, first.id)
    assert result == {"memory_id": first.id, "deleted": [first.id, second.id], "versions": 2}
    for crystal_id in (first.id, second.id):
        with pytest.raises(CrystalNotFound):
            memory.get(crystal_id)
    assert ids(memory.search(SearchRequest("staging cluster"))) == [kept.id]
    assert [c.id for c in versions.list_memories(memory)] == [kept.id]
    with pytest.raises(CrystalNotFound):
        versions.delete(memory, second.id)  # already deleted
    assert versions.history(memory, second.id)["deleted"] is True

    report = memory.consolidate()
    assert report.purged == 2
    assert memory.store.versions(first.id) == []
    history = versions.history(memory, second.id)  # the audit trail survives the purge
    assert history["purged"] and [t["action"] for t in history["transitions"]][-2:] == ["purged", "purged"]
    assert memory.get(kept.id).text.endswith("three nodes")


def test_namespaces_never_mix(memory: Memory) -> None:
    jonas = add(memory, FACT, namespace="user:jonas", type="fact").crystal
    planner = add(memory, FACT, namespace="agent:planner", type="fact")
    assert planner.outcome == "created" and planner.crystal.id != jonas.id  # same text, other namespace
    other = add(memory, "Jonas prefers dark roast coffee", namespace="user:jonas").crystal

    def found(namespace: str) -> list[str]:
        return ids(memory.search(SearchRequest("staging cluster coffee", namespaces=(namespace,))))

    assert sorted(found("user:jonas")) == sorted([jonas.id, other.id])
    assert found("agent:planner") == [planner.crystal.id]
    assert found("default") == []
    everywhere = ids(memory.search(SearchRequest("staging cluster coffee", namespaces=())))
    assert sorted(everywhere) == sorted([jonas.id, other.id, planner.crystal.id])
    assert {c.id for c in versions.list_memories(memory, "agent:planner")} == {planner.crystal.id}
    assert memory.store.namespaces() == [{"namespace": "agent:planner", "memories": 1},
                                         {"namespace": "user:jonas", "memories": 2}]
    # Updating and deleting in one namespace leaves the other untouched.
    versions.delete(memory, jonas.id)
    assert found("agent:planner") == [planner.crystal.id]
    with pytest.raises(InvalidNamespace):
        add(memory, FACT, namespace="user:../etc")


def test_readding_identical_text_is_an_explicit_outcome(memory: Memory) -> None:
    first = add(memory, FACT, scope="private")
    again = add(memory, FACT, scope="public")
    assert (first.outcome, again.outcome) == ("created", "exists")
    assert again.crystal.id == first.crystal.id
    assert again.differs == {"scope": {"stored": "private", "requested": "public"}}
    assert again.to_dict()["outcome"] == "exists"
    assert add(memory, FACT).differs == {}


def test_a_small_namespace_gets_its_nearest_beside_a_big_one(memory: Memory) -> None:
    crowd = [f"Deployment log line {i}: service alpha restarted on host web-{i}" for i in range(300)]
    memory.add_crystals([memory.prepare(text) for text in crowd])
    small = [add(memory, text, namespace="session:42").crystal.id for text in (
        "alpha service restarted after the config push", "web host rebooted twice", "deployment paused")]
    hits = memory.search(SearchRequest("service alpha restarted on host", k=3, namespaces=("session:42",)))
    assert sorted(ids(hits)) == sorted(small)


def test_ttl_is_enforced_at_read_time(memory: Memory) -> None:
    crystal = memory.prepare("The on-call phone is with Maria this week", ttl_ms=60_000)
    crystal.created_at_ms = crystal.valid_from_ms = now_ms() - 61_000  # added 61 s ago
    memory.add_crystals([crystal])
    live = memory.add("The on-call rotation changes on Mondays", ttl_ms=3_600_000)
    hits = ids(memory.search(SearchRequest("on-call")))
    assert hits == [live.id]  # the expired one is gone before any consolidation runs
    with pytest.raises(CrystalNotFound):
        memory.get(crystal.id)
    assert crystal.id not in {c.id for c in versions.list_memories(memory)}
    # The same text can be remembered again: the expired crystal's validity ended at its expiry.
    again = add(memory, "The on-call phone is with Maria this week")
    assert again.outcome == "created"
    assert memory.store.get(crystal.id).valid_to_ms == crystal.expires_at_ms


def test_skill_versions_are_one_memory(memory: Memory) -> None:
    skill = memory.add("Rerun a flaky job three times and diff the environments",
                       semantic_type=SemanticType.SKILL)
    newer = memory.new_skill_version(skill.id, "Rerun a flaky job five times, then diff the lockfiles")
    assert (newer.memory_id, newer.version) == (skill.id, 2)
    assert memory.get(skill.id).superseded_by == newer.id
    updated = versions.update(memory, skill.id, "Rerun a flaky job five times, diff lockfiles and env")
    assert (updated.skill_version, updated.stable_skill_id, updated.version) == (3, skill.id, 3)
    assert memory.store.get(newer.id).deprecated


def test_a_skill_holds_a_market_bundle_other_memories_keep_their_limit(memory: Memory) -> None:
    """Issue 39: a skill crystal's text may be a whole market bundle (192 KiB of UTF-8); every
    other memory keeps 65,536 characters; nothing half-applies when a text is refused."""
    from protocol.skill_bundle import MAX_BUNDLE_BYTES, build

    skill_md = "---\nname: big-runbook\ndescription: A large runbook.\n---\nRead the references."
    bundle = build(skill_md, {"references/runbook.md": "check the replica lag\n" * 5000,
                              "references/more.md": "and the WAL position\n" * 2000}).encode()
    assert 65_536 < len(bundle) <= MAX_BUNDLE_BYTES
    skill = add(memory, bundle, type="skill").crystal
    assert memory.get(skill.id).text == bundle
    grown = versions.update(memory, skill.id, bundle.replace("A large runbook", "A larger runbook"))
    assert grown.text.startswith("---\nname: big-runbook\ndescription: A larger runbook")
    before = len(memory.store.versions(grown.memory_id))
    for too_large in ("x" * (MAX_BUNDLE_BYTES + 1), "é" * (MAX_BUNDLE_BYTES // 2 + 1)):  # chars, then bytes
        with pytest.raises(MemoryInputError, match="196608"):
            add(memory, too_large, type="skill")
        with pytest.raises(MemoryInputError, match="skill's text is larger than"):
            versions.update(memory, grown.id, too_large)
        with pytest.raises(MemoryInputError, match="skill's text is larger than"):
            memory.new_skill_version(grown.id, too_large)
    assert len(memory.store.versions(grown.memory_id)) == before
    with pytest.raises(MemoryInputError, match="only a skill may hold more"):
        add(memory, "y" * 65_537, type="fact")
    fact = add(memory, FACT, type="fact").crystal
    with pytest.raises(MemoryInputError, match="only a skill may hold more"):
        versions.update(memory, fact.id, "y" * 65_537)
    assert memory.get(fact.id).superseded_by is None
