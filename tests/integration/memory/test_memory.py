"""The Memory facade over a real data dir: governance, search, consolidation, skills."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import trio

from node.config import NodeConfig
from node.crystals.model import (
    AccessScope,
    Lifecycle,
    LifespanPolicy,
    ProvenanceOperation,
    SemanticType,
    Sensitivity,
    now_ms,
)
from node.crystals.store import CrystalNotFound, EmbedderMismatch, StoreError
from node.memory.async_memory import AsyncMemory
from node.memory.embedding.embedder import HashingEmbedder
from node.memory.facade import Memory, MemoryInputError, SearchRequest

SECRET = "my api key is sk-live-4eC39HqLyjWDarjtT1zdp7dc for the billing service"
DAY_MS = 24 * 3600 * 1000


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.crystal.id for hit in hits]


def reopen(config: NodeConfig) -> Memory:
    return Memory(config)


# --- governance -------------------------------------------------------------------------------


def test_secret_is_confidential_and_only_local_agent_sees_it(memory: Memory) -> None:
    secret = memory.add(SECRET)
    assert secret.governance.sensitivity is Sensitivity.CONFIDENTIAL
    assert secret.governance.access_scope is AccessScope.CONFIDENTIAL
    assert memory.local_only(secret)

    assert secret.id in ids(memory.search(SearchRequest("billing api key")))
    for requester in ("peer", "authenticated_session", "anonymous", "someone-unknown"):
        hits = memory.search(SearchRequest("billing api key", requester=requester))
        assert secret.id not in ids(hits)
        with pytest.raises(CrystalNotFound):
            memory.get(secret.id, requester=requester)
    assert memory.get(secret.id).text == SECRET


@pytest.mark.parametrize("asked", list(AccessScope))
def test_explicit_scope_cannot_loosen_a_secret(memory: Memory, asked: AccessScope) -> None:
    secret = memory.add(SECRET, scope=asked)
    assert secret.governance.access_scope is AccessScope.CONFIDENTIAL
    assert memory.search(SearchRequest("billing", requester="peer")) == []


def test_explicit_scope_may_tighten_and_public_is_visible_to_peers(memory: Memory) -> None:
    skill = memory.add("rotate logs with logrotate weekly", semantic_type=SemanticType.SKILL)
    assert skill.governance.access_scope is AccessScope.SHARED  # default for normal skills
    tight = memory.add("compress logs with zstd", semantic_type=SemanticType.SKILL, scope=AccessScope.PRIVATE)
    assert tight.governance.access_scope is AccessScope.PRIVATE
    public = memory.add("logs belong in /var/log", scope=AccessScope.PUBLIC)
    assert public.governance.access_scope is AccessScope.PUBLIC

    assert ids(memory.search(SearchRequest("logs", requester="peer"))) == [public.id]
    session = set(ids(memory.search(SearchRequest("logs", requester="authenticated_session"))))
    assert session == {public.id, skill.id}
    assert memory.get(public.id, requester="peer").id == public.id
    with pytest.raises(CrystalNotFound):
        memory.get(tight.id, requester="authenticated_session")


def test_personal_content_is_private(memory: Memory) -> None:
    crystal = memory.add("my name is Ada and my email is ada@example.org", scope=AccessScope.SHARED)
    assert crystal.governance.sensitivity is Sensitivity.PERSONAL
    assert crystal.governance.access_scope is AccessScope.PRIVATE


# --- ingestion --------------------------------------------------------------------------------


def test_add_dedups_and_indexes_once(memory: Memory) -> None:
    first = memory.add("postgres listens on port 5432")
    second = memory.add("  postgres listens on port 5432  ")
    assert first.id == second.id
    assert memory.index.count == 1
    assert memory.store.vector_stats()[0] == 1


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_text_is_refused(memory: Memory, text: str) -> None:
    with pytest.raises(MemoryInputError, match="needs some text"):
        memory.add(text)
    assert memory.store.stats()["total"] == 0


def test_ttl_lifespan_needs_a_ttl(memory: Memory) -> None:
    with pytest.raises(MemoryInputError, match="ttl"):
        memory.add("short lived", lifespan=LifespanPolicy.TTL)
    assert memory.store.stats()["total"] == 0


def test_prepare_fills_provenance_and_hormones(memory: Memory) -> None:
    crystal = memory.prepare("fixed the flaky deploy, finally a success!")
    assert crystal.governance.provenance_chain == ["local_agent"]
    assert [node.operation for node in crystal.provenance_dag] == [ProvenanceOperation.CREATED]
    assert crystal.provenance_dag[0].crystal_id == crystal.id
    assert crystal.hormonal_influence is not None
    assert crystal.lifecycle is Lifecycle.GENERATED
    assert memory.prepare("a skill", semantic_type=SemanticType.SKILL).lifecycle is Lifecycle.FROZEN


def test_failed_batch_leaves_store_and_index_unchanged(memory: Memory) -> None:
    memory.add("already stored")
    good = memory.prepare("fresh text one")
    clash = memory.prepare("fresh text two")
    clash.id = good.id  # UNIQUE(id) makes the second insert fail
    with pytest.raises(Exception, match="UNIQUE"):
        memory.add_crystals([good, clash])
    assert memory.store.stats()["total"] == 1
    assert memory.index.count == 1


# --- search -----------------------------------------------------------------------------------


def test_search_filters_by_type_lifecycle_and_scope(memory: Memory) -> None:
    fact = memory.add("the staging database is on host db2", semantic_type=SemanticType.FACT)
    skill = memory.add("restart the staging database with systemctl", semantic_type=SemanticType.SKILL)
    public = memory.add("staging database docs are public", scope=AccessScope.PUBLIC)
    expired = memory.add("staging database used to be db1")
    memory.store.set_lifecycle(expired.id, Lifecycle.EXPIRED, "test")

    everything = set(ids(memory.search(SearchRequest("staging database"))))
    assert everything == {fact.id, skill.id, public.id}  # expired crystals are hidden by default
    assert ids(memory.search(SearchRequest("staging database", semantic_types=("fact",)))) == [fact.id]
    assert ids(memory.search(SearchRequest("staging database", lifecycles=("frozen",)))) == [skill.id]
    assert ids(memory.search(SearchRequest("staging database", scopes=("public",)))) == [public.id]
    archived_or_expired = memory.search(SearchRequest("staging database", lifecycles=("expired",)))
    assert archived_or_expired == []  # asked for explicitly, expired still reads as gone
    assert len(memory.search(SearchRequest("staging database", k=2))) == 2


def test_empty_query_is_refused(memory: Memory) -> None:
    with pytest.raises(MemoryInputError, match="empty search query"):
        memory.search(SearchRequest("   "))


def test_hits_update_access_count_and_time(memory: Memory) -> None:
    crystal = memory.add("kubernetes pods restart on OOM")
    assert crystal.access_count == 0 and crystal.last_accessed_at_ms is None
    before = now_ms()
    hits = memory.search(SearchRequest("kubernetes OOM"))
    assert ids(hits) == [crystal.id]
    assert hits[0].crystal.access_count == 1
    stored = memory.store.get(crystal.id)
    assert stored.access_count == 1
    assert stored.last_accessed_at_ms is not None and stored.last_accessed_at_ms >= before
    memory.search(SearchRequest("kubernetes OOM"))
    assert memory.store.get(crystal.id).access_count == 2
    memory.search(SearchRequest("kubernetes OOM", record_access=False))
    assert memory.store.get(crystal.id).access_count == 2


def test_search_survives_reopen(node_config: NodeConfig) -> None:
    first = reopen(node_config)
    crystal = first.add("grafana dashboards live in the ops repo")
    first.close()
    second = reopen(node_config)
    try:
        assert second.index_state == "loaded"
        assert ids(second.search(SearchRequest("grafana dashboards"))) == [crystal.id]
    finally:
        second.close()


# --- consolidation ----------------------------------------------------------------------------


def test_consolidation_expires_unaccessed_crystal_and_purge_removes_it(memory: Memory) -> None:
    now = now_ms()
    year_ago = now - 365 * DAY_MS
    stale = memory.add("the old office wifi password was changed in spring")
    fresh = memory.add("the new office opens at nine")
    old_skill = memory.add("reset the office router", semantic_type=SemanticType.SKILL)
    memory.store.db.execute(
        "UPDATE crystals SET created_at_ms=?, last_accessed_at_ms=NULL WHERE id IN (?, ?)",
        (year_ago, stale.id, old_skill.id),
    )
    stale_rowid = memory.store.fts("wifi", 5)[0][0]

    report = memory.consolidate(now=now)
    assert report.expired == 1
    assert {"id": stale.id, "from": "generated", "to": "expired", "reason": "below_forget_threshold"} in report.transitions
    assert memory.store.get(stale.id).lifecycle is Lifecycle.EXPIRED
    assert memory.store.get(fresh.id).lifecycle is not Lifecycle.EXPIRED
    assert memory.store.get(old_skill.id).lifecycle is Lifecycle.FROZEN  # skills never decay away
    assert memory.store.get(stale.id).importance_score < memory.config.memory.forget_threshold
    logged = memory.store.audit_log(stale.id)[0]
    assert (logged["action"], logged["from_state"], logged["to_state"]) == ("transition", "generated", "expired")
    assert memory.store.get_meta("last_consolidation_ms") == str(now)

    assert memory.purge() == 1
    with pytest.raises(CrystalNotFound):
        memory.store.get(stale.id)
    assert memory.store.fts("wifi", 5) == []
    assert memory.index.count == 2 == memory.store.vector_stats()[0]
    stale_vector = memory.embed([stale.text])[0]
    assert stale_rowid not in {rowid for rowid, _ in memory.index.query(stale_vector, 5)}
    assert memory.store.audit_log(stale.id)[0]["action"] == "purged"


def test_consolidate_with_purge_and_reopen_keeps_index_valid(node_config: NodeConfig) -> None:
    first = reopen(node_config)
    old = first.add("an ancient note nobody reads")
    first.add("a note from today")
    first.store.db.execute(
        "UPDATE crystals SET created_at_ms=? WHERE id=?", (now_ms() - 400 * DAY_MS, old.id)
    )
    report = first.consolidate(purge=True)
    assert (report.expired, report.purged) == (1, 1)
    first.close()
    second = reopen(node_config)
    try:
        assert second.index_state == "loaded"  # the purge was recorded in the index sidecar
        assert second.index.count == 1
    finally:
        second.close()


def test_ttl_crystal_expires_when_ttl_elapses(memory: Memory) -> None:
    crystal = memory.add("deploy freeze until friday", ttl_ms=60_000)
    assert crystal.governance.lifespan_policy is LifespanPolicy.TTL
    report = memory.consolidate(now=crystal.created_at_ms + 30_000)
    assert report.ttl_expired == 0
    report = memory.consolidate(now=crystal.created_at_ms + 60_000)
    assert report.ttl_expired == 1
    assert memory.store.get(crystal.id).lifecycle is Lifecycle.EXPIRED


# --- skills -----------------------------------------------------------------------------------


def test_new_skill_version_deprecates_the_old_one(memory: Memory) -> None:
    v1 = memory.add("deploy: run make release", semantic_type=SemanticType.SKILL, skill_tags=["ci"])
    memory.record_execution(v1.id, True)
    v2 = memory.new_skill_version(v1.id, "deploy: run make release && make verify")

    old = memory.store.get(v1.id)
    assert old.deprecated
    assert old.stable_skill_id == v1.id
    assert old.deprecated_by == v1.id  # the stable id
    assert v2.stable_skill_id == v1.id
    assert v2.previous_version_id == v1.id
    assert v2.skill_version == 2
    assert v2.skill_tags == ["ci"]
    assert v2.execution.executions == 0  # a new text has to prove itself again
    assert v2.provenance_dag[0].operation is ProvenanceOperation.MUTATED
    assert v2.provenance_dag[0].parent_ids == [v1.id]
    assert [c.id for c in memory.store.skill_versions(v1.id)] == [v1.id, v2.id]
    assert [a["action"] for a in memory.store.audit_log(v1.id)][:2] == ["deprecated", "stable_skill_id_set"]
    assert memory.index.count == 2
    assert v2.id in ids(memory.search(SearchRequest("make verify")))

    v3 = memory.new_skill_version(v2.id, "deploy: make release, verify, announce")
    assert (v3.skill_version, v3.stable_skill_id, v3.previous_version_id) == (3, v1.id, v2.id)
    assert memory.store.get(v2.id).deprecated_by == v1.id


def test_versioning_refusals_write_nothing(memory: Memory) -> None:
    fact = memory.add("not a skill")
    skill = memory.add("a skill body", semantic_type=SemanticType.SKILL)
    memory.new_skill_version(skill.id, "a better skill body")
    total = memory.store.stats()["total"]
    with pytest.raises(MemoryInputError, match="only skill and task_pattern"):
        memory.new_skill_version(fact.id, "whatever")
    with pytest.raises(MemoryInputError, match="already superseded"):
        memory.new_skill_version(skill.id, "branching from an old version")
    with pytest.raises(StoreError, match="already exists"):
        latest = memory.store.skill_versions(skill.id)[-1]
        memory.new_skill_version(latest.id, "not a skill")
    assert memory.store.stats()["total"] == total
    assert not memory.store.get(memory.store.skill_versions(skill.id)[-1].id).deprecated


def test_record_execution_defaults_reward(memory: Memory) -> None:
    skill = memory.add("bisect the regression", semantic_type=SemanticType.SKILL)
    memory.record_execution(skill.id, True)
    after = memory.record_execution(skill.id, False).crystal
    assert (after.execution.executions, after.execution.successes) == (2, 1)
    assert after.execution.reward_sum == 1.0


def test_status(memory: Memory) -> None:
    memory.add("one")
    memory.add("two", semantic_type=SemanticType.SKILL)
    status = memory.status()
    assert status["total"] == 2
    assert status["by_type"] == {"general": 1, "skill": 1}
    assert status["embedder"] == "hashing-384" and status["dim"] == 384
    assert status["index"] == {"vectors": 2, "state": "rebuilt"}
    assert "dopamine" in status["hormones"]


# --- embedder binding -------------------------------------------------------------------------


class OtherEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=384)
        self.name = "some-other-model"


def test_opening_with_another_embedder_is_refused(node_config: NodeConfig) -> None:
    first = reopen(node_config)
    first.add("bound to the hashing embedder")
    first.close()
    with pytest.raises(EmbedderMismatch, match=r"'hashing-384' .* 'some-other-model'"):
        Memory(node_config, embedder=OtherEmbedder())
    with pytest.raises(EmbedderMismatch, match="64-d"):
        Memory(node_config, embedder=HashingEmbedder(dim=64))
    again = reopen(node_config)  # the refused opens released the store
    try:
        assert again.store.stats()["total"] == 1
    finally:
        again.close()


# --- trio -------------------------------------------------------------------------------------


async def test_async_memory_serialises_concurrent_adds(memory: Memory) -> None:
    facade = AsyncMemory(memory)
    texts = [f"async note number {i}" for i in range(20)]
    async with trio.open_nursery() as nursery:
        for text in texts:
            nursery.start_soon(facade.add, text)
    assert memory.store.stats()["total"] == 20
    assert memory.index.count == 20
    hits = await facade.search(SearchRequest("async note number 7"))
    assert hits[0].crystal.text == "async note number 7"


# --- semantics (the real model) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    from node.config import load_config

    config = load_config(
        tmp_path_factory.mktemp("minilm"), overrides={"memory": {"embedder": "minilm"}}, environ={}
    )
    opened = Memory(config)
    opened.add_crystals(
        [
            opened.prepare(text)
            for text in (
                "The cat slept on the warm windowsill all afternoon.",
                "Quarterly revenue grew twelve percent year over year.",
                "To rotate TLS certificates, run certbot renew and reload nginx.",
                "Alice prefers tea over coffee in the morning.",
            )
        ]
    )
    try:
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize(
    "query, expected_start",
    [
        ("a kitten napping in the sun", "The cat"),
        ("how did sales do this quarter", "Quarterly revenue"),
        ("renew https certificate for the web server", "To rotate TLS"),
        ("what hot drink does she like", "Alice prefers"),
    ],
)
def test_minilm_finds_paraphrases(minilm_memory: Memory, query: str, expected_start: str) -> None:
    hits = minilm_memory.search(SearchRequest(query, k=4, record_access=False))
    assert hits[0].crystal.text.startswith(expected_start)
    assert hits[0].dense is not None and hits[0].dense > 0.2


def test_minilm_vectors_are_unit_length(minilm_memory: Memory) -> None:
    assert minilm_memory.embedder.name.startswith("all-MiniLM-L6-v2")
    vectors = minilm_memory.embed(["one sentence", "another one"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
