"""Seed 004 tiers, testaments and the budgeted context on real data dirs."""

from __future__ import annotations

import os
from pathlib import Path

import cbor2
import pytest

from node.config import NodeConfig, load_config
from node.crystals.model import Lifecycle, SemanticType
from node.memory.facade import Memory
from node.memory.learning.budget_context import budget_context
from node.memory.learning.knowledge import Provenance
from node.memory.learning.testament_io import TestamentRefused, export_testament, import_testament
from node.memory.learning.tiers import end_session, tier_status
from node.memory.search.pipeline import MemoryInputError
from protocol.codec import encode
from protocol.identity import Identity

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
T0 = 1_700_000_000_000
ELDER = Identity.from_seed(bytes(range(32)))


def fresh(tmp_path: Path, name: str, **memory: object) -> Memory:
    config = load_config(tmp_path / name, overrides={"memory": {"embedder": "hashing", **memory}}, environ={})
    return Memory(config)


def tier(memory: Memory, crystal_id: str) -> str:
    if memory.store.get(crystal_id).lifecycle is Lifecycle.EXPIRED:
        return "expired"
    state = memory.learning.knowledge.energy_states().get(crystal_id)
    return state.tier.value if state else "working"


def test_energy_policy_moves_tiers_as_the_seed_table_says(tmp_path: Path) -> None:
    memory = fresh(tmp_path, "energy", policy="energy")
    try:
        idle = memory.add("idle memory nobody reads", created_at_ms=T0).id
        hot = memory.add("hot memory read at once", created_at_ms=T0).id
        boundary = memory.add("memory read once after an hour", created_at_ms=T0).id
        warning = memory.add("warning: the bridge contract drains funds", semantic_type=SemanticType.WARNING,
                             created_at_ms=T0).id
        memory.store.record_access([hot], T0)
        memory.consolidate(now=T0)  # hot: 1 + 1 = 2.0 → short-term
        assert tier(memory, hot) == "short_term"
        memory.store.record_access([boundary], T0 + HOUR_MS)
        memory.consolidate(now=T0 + HOUR_MS)  # e^-0.5 + 1 = 1.61 < 2.0
        assert tier(memory, boundary) == "working"
        result = end_session(memory, memory.learning, T0 + HOUR_MS)  # ≥ 1.5 at a session boundary
        assert [p["id"] for p in result["tiers"]["promoted"]] == [boundary]
        memory.consolidate(now=T0 + 5 * HOUR_MS)  # idle: e^-2.5 = 0.082 < 0.1 → expired
        assert tier(memory, idle) == "expired"
        assert tier(memory, warning) == "working"  # never expires
        for hour in range(6, 11):  # 2.0 at 0 h → 2.48, 3.36, 4.20, 4.995, 5.75 at 10 h
            memory.store.record_access([hot], T0 + hour * HOUR_MS)
            memory.consolidate(now=T0 + hour * HOUR_MS)
        assert tier(memory, hot) == "long_term"
        actions = [(a["action"], a["from_state"], a["to_state"]) for a in memory.store.audit_log(hot)]
        assert ("tier_promoted", "working", "short_term") in actions
        assert ("tier_promoted", "short_term", "long_term") in actions
        reasons = [a["detail"]["reason"] for a in memory.store.audit_log(idle) if a["action"] == "transition"]
        assert reasons == ["energy_expired"]
        status = tier_status(memory, memory.learning)
        assert status["policy"] == "energy" and status["tiers"]["long_term"] == 1
        assert memory.status()["tiers"]["tiers"] == status["tiers"]
    finally:
        memory.close()


def test_importance_policy_keeps_tiers_still(memory: Memory) -> None:
    crystal = memory.add("a memory under the default policy", created_at_ms=T0)
    memory.store.record_access([crystal.id], T0)
    memory.consolidate(now=T0)
    result = end_session(memory, memory.learning, T0)
    assert "tiers" not in result and tier(memory, crystal.id) == "working"


def test_unknown_policy_is_a_config_error(tmp_path: Path) -> None:
    from node.config import ConfigError

    with pytest.raises(ConfigError):
        fresh(tmp_path, "bad", policy="vibes")


def learned_elder(tmp_path: Path) -> Memory:
    elder = fresh(tmp_path, "elder")
    for i in range(3):
        elder.add(f"the staging deploy failed on friday, users table migration lock, run {i}",
                  semantic_type=SemanticType.EPISODE, created_at_ms=T0 + i)
    elder.add("warning: wallet 0xdead is a honeypot", semantic_type=SemanticType.WARNING, created_at_ms=T0)
    elder.add("my api key is sk-live-4eC39HqLyjWDarjtT1zdp7dc for billing", semantic_type=SemanticType.EPISODE,
              created_at_ms=T0)
    elder.consolidate(now=T0 + HOUR_MS)
    return elder


def test_testament_carries_knowledge_to_a_fresh_node_below_its_own(tmp_path: Path) -> None:
    elder = learned_elder(tmp_path)
    file = tmp_path / "elder.testament"
    try:
        exported = export_testament(elder, elder.learning, ELDER, file, at_ms=T0 + HOUR_MS)
    finally:
        elder.close()
    assert exported["kinds"] == {"warning": 1, "fact": 1, "episode": 3}  # the secret stayed home
    assert os.stat(file).st_mode & 0o777 == 0o600
    heir = fresh(tmp_path, "heir")
    try:
        result = import_testament(heir, heir.learning, file.read_bytes(), at_ms=T0 + 2 * HOUR_MS)
        assert result["imported"] == 5 and result["signer"] == ELDER.peer_id
        rows = heir.learning.knowledge.rows()
        fact = next(c for c in heir.store.list_crystals(limit=20) if c.semantic_type is SemanticType.FACT)
        warning = next(c for c in heir.store.list_crystals(limit=20) if c.semantic_type is SemanticType.WARNING)
        assert rows[fact.id].confidence == pytest.approx(0.7 * 0.85)
        assert rows[fact.id].provenance is Provenance.IMPORTED and rows[fact.id].signer == ELDER.peer_id
        assert rows[fact.id].generation == 1 and fact.governance.peer_origin == ELDER.peer_id
        assert rows[warning.id].confidence == pytest.approx(0.85)
        again = import_testament(heir, heir.learning, file.read_bytes(), at_ms=T0 + 3 * HOUR_MS)
        assert again["imported"] == 0 and again["already_known"] == 5
        # A cycle after the import: the three imported episodes (which gave the elder its fact)
        # do not reinforce the imported fact, nor fold into a second one.
        report = heir.consolidate(now=T0 + 4 * HOUR_MS)
        assert report.learning["reinforced"] == {} and report.learning["facts_born"] == []
        assert heir.learning.knowledge.get(fact.id) == rows[fact.id]
    finally:
        heir.close()


OWN_EPISODE = "the staging deploy failed on friday, users table migration lock, run 9"


def test_an_inherited_fact_re_earns_confidence_only_from_the_heirs_own_observations(tmp_path: Path) -> None:
    elder = learned_elder(tmp_path)
    elder.add("never deploy on a friday afternoon", semantic_type=SemanticType.DIRECTIVE, created_at_ms=T0)
    try:
        exported = export_testament(elder, elder.learning, ELDER, None, at_ms=T0 + HOUR_MS)
    finally:
        elder.close()
    assert exported["kinds"] == {"warning": 1, "directive": 1, "fact": 1, "episode": 3}
    heir = fresh(tmp_path, "heir")
    try:
        import_testament(heir, heir.learning, exported["data"], at_ms=T0 + 2 * HOUR_MS)
        [directive] = [c for c in heir.store.list_crystals(limit=20) if c.semantic_type is SemanticType.DIRECTIVE]
        assert directive.text == "never deploy on a friday afternoon" and directive.governance.peer_origin
        fact = next(c for c in heir.store.list_crystals(limit=20) if c.semantic_type is SemanticType.FACT)
        inherited = heir.learning.knowledge.get(fact.id)
        assert inherited is not None

        def confidence(at: int) -> float:
            return heir.learning.confidences([fact], at)[fact.id]

        # Cycles with no new observation: the imported episodes are not evidence here.
        for hour in (3, 4, 30):
            heir.consolidate(now=T0 + hour * HOUR_MS)
        row = heir.learning.knowledge.get(fact.id)
        assert row == inherited and heir.learning.knowledge.sources(fact.id) == []
        at = T0 + 31 * HOUR_MS
        assert confidence(at) < inherited.confidence  # it only decays
        before = confidence(at)
        # The heir's own observation of the same thing does reinforce it.
        own = heir.add(OWN_EPISODE, semantic_type=SemanticType.EPISODE, created_at_ms=at)
        report = heir.consolidate(now=at)
        assert report.learning["reinforced"] == {fact.id: 1}
        assert heir.learning.knowledge.sources(fact.id) == [own.id]
        row = heir.learning.knowledge.get(fact.id)
        assert row is not None and row.episode_count == inherited.episode_count + 1
        assert confidence(at) > before
        # Through all of it the inherited directive stayed: it never decays or is doubted away.
        assert heir.store.get(directive.id).lifecycle is not Lifecycle.EXPIRED
    finally:
        heir.close()


def snapshot(memory: Memory) -> tuple[int, int, int]:
    return (
        memory.store.stats()["total"],
        len(memory.learning.knowledge.rows()),
        memory.index.count,
    )


@pytest.mark.parametrize("attack", ["flip", "resign", "oversize", "nested", "too_many", "truncated",
                                    "bad_namespace"])
def test_a_crafted_testament_is_refused_and_nothing_is_applied(tmp_path: Path, attack: str) -> None:
    elder = learned_elder(tmp_path)
    try:
        data = export_testament(elder, elder.learning, ELDER, None, at_ms=T0)["data"]
    finally:
        elder.close()
    if attack == "flip":
        tampered = bytearray(data)
        tampered[len(data) // 2] ^= 0x20
        data = bytes(tampered)
    elif attack == "resign":  # the body changed and was re-signed by another key under the elder's name
        decoded = cbor2.loads(data)
        decoded["body"]["entries"][0]["confidence_ppm"] = 1_000_000
        decoded["signature"] = Identity.generate().sign(b"crystalmesh/testament/v1\x00" + encode(
            {"version": 1, "body": decoded["body"]}))
        data = encode(decoded)
    elif attack == "oversize":
        data = data + b"\x00" * (11 * 1024 * 1024)
    elif attack == "nested":
        deep: object = 1
        for _ in range(200):
            deep = [deep]
        data = cbor2.dumps({"version": 1, "body": deep, "signature": b"\x00" * 64})
    elif attack == "too_many":
        decoded = cbor2.loads(data)
        entry = decoded["body"]["entries"][0]
        decoded["body"]["entries"] = [entry | {"id": f"x{i}", "text": f"t{i}"} for i in range(2049)]
        payload = {"version": 1, "body": decoded["body"]}
        data = encode(payload | {"signature": ELDER.sign(b"crystalmesh/testament/v1\x00" + encode(payload))})
    elif attack == "truncated":
        data = data[:-10]
    elif attack == "bad_namespace":  # validly signed, but the last entry names no namespace we accept
        decoded = cbor2.loads(data)
        decoded["body"]["entries"][-1]["namespace"] = "Not A Namespace"
        payload = {"version": 1, "body": decoded["body"]}
        data = encode(payload | {"signature": ELDER.sign(b"crystalmesh/testament/v1\x00" + encode(payload))})
    heir = fresh(tmp_path, "heir")
    try:
        heir.add("something the heir already knew")
        before = snapshot(heir)
        with pytest.raises(TestamentRefused):
            import_testament(heir, heir.learning, data)
        assert snapshot(heir) == before
    finally:
        heir.close()


def test_budgeted_context_has_typed_blocks_and_reports_evictions(tmp_path: Path) -> None:
    memory = learned_elder(tmp_path)
    try:
        memory.add("deploy skill: run the migration before friday", semantic_type=SemanticType.SKILL)
        result = budget_context(memory, memory.learning, "staging deploy friday migration", 10_000,
                                working_memory="# Working Memory State\ngoal: ship v2")
        kinds = [kind.value for kind, _ in result.blocks]
        assert kinds[0] == "warnings" and kinds[-1] == "working_memory"
        assert {"facts", "episodes", "skills"} <= set(kinds)
        values = {i.id: i.value for _, items in result.blocks for i in items}
        fact = next(i.id for kind, items in result.blocks if kind.value == "facts" for i in items)
        memory.learning.feedback(fact, "wrong")  # value = relevance × confidence
        rerun = budget_context(memory, memory.learning, "staging deploy friday migration", 10_000)
        assert {i.id: i.value for _, items in rerun.blocks for i in items}[fact] < 0.6 * values[fact]
        small = budget_context(memory, memory.learning, "staging deploy friday migration", 40)
        assert small.used_tokens <= 40 and small.evicted
        assert {e.reason for e in small.evicted} <= {"over_budget"} | {
            e.reason for e in small.evicted if e.reason.startswith("near_duplicate_of:")}
        with pytest.raises(MemoryInputError):
            budget_context(memory, memory.learning, "x", -1)
    finally:
        memory.close()


def test_node_config_default_policy(node_config: NodeConfig) -> None:
    assert node_config.memory.policy == "importance"


@pytest.mark.parametrize(("inherited", "local"), [("one", "two"), ("two", "one")])
def test_inherited_knowledge_ranks_below_equally_relevant_local_knowledge(
    tmp_path: Path, inherited: str, local: str
) -> None:
    text = "the release checklist lives in the ops wiki page {}"
    elder = fresh(tmp_path, "elder")
    try:
        elder.add(text.format(inherited), semantic_type=SemanticType.FACT)
        data = export_testament(elder, elder.learning, ELDER, None)["data"]
    finally:
        elder.close()
    heir = fresh(tmp_path, "heir")
    try:
        own = heir.add(text.format(local), semantic_type=SemanticType.FACT)
        import_testament(heir, heir.learning, data)
        from node.memory.search.pipeline import SearchRequest

        hits = heir.search(SearchRequest("release checklist ops wiki", k=2, record_access=False))
        assert hits[0].crystal.id == own.id
        assert hits[1].crystal.origin.value == "peer"
    finally:
        heir.close()


def test_under_the_energy_policy_a_fact_starts_with_its_evidence(tmp_path: Path) -> None:
    memory = fresh(tmp_path, "energy", policy="energy")
    try:
        for i in range(3):
            memory.add(f"the staging deploy failed on friday, users table migration lock, run {i}",
                       semantic_type=SemanticType.EPISODE, created_at_ms=T0)
        memory.consolidate(now=T0)  # born with 3 accesses: 1 + 3 = 4.0 ≥ 2.0
        fact = next(c for c in memory.store.list_crystals(limit=10) if c.semantic_type is SemanticType.FACT)
        assert fact.access_count == 3
        assert tier(memory, fact.id) == "short_term"
    finally:
        memory.close()


def test_tampered_knowledge_and_energy_rows_do_not_stop_consolidation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = fresh(tmp_path, "tampered", policy="energy")
    try:
        crystal = memory.add("a memory whose rows get tampered with", created_at_ms=T0)
        memory.learning.feedback(crystal.id, "wrong", at_ms=T0)
        memory.consolidate(now=T0)
        with memory.db.transaction() as conn:  # a hostile local edit of the database file
            conn.execute("UPDATE knowledge SET confidence='NaN?', provenance='root' WHERE crystal_id=?",
                         (crystal.id,))
            conn.execute("UPDATE memory_energy SET tier='godmode', energy=-5 WHERE crystal_id=?", (crystal.id,))
        memory.consolidate(now=T0 + HOUR_MS)  # no exception
        assert "corrupt" in caplog.text
        assert memory.learning.confidences([crystal], T0 + HOUR_MS)[crystal.id] == 0.0
    finally:
        memory.close()
