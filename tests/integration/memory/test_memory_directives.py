"""Memories that keep what the user said (issue 28, item 5) on a real data dir.

A directive outlives a simulated year of consolidation under both policies while an
ordinary note decays as before; on a conflict the higher epistemic layer ranks
first; bought knowledge enters at the market's confidence, ranks below equally
relevant own knowledge, is marked with its seller and never moves the hormones.
The clock is driven through ``consolidate(now=…)`` and the hormones' ``now_ms``.
"""

from __future__ import annotations

import pytest

from node.config import NodeConfig, load_config
from node.crystals import Acquisition, Lifecycle, Origin, SemanticType, Source
from node.market.book.listings import StoredListing
from node.market.purchase.skill_import import imported_skill
from node.memory.facade import Memory
from node.memory.learning.confidence import BOUGHT_CONFIDENCE
from node.memory.learning.knowledge import Provenance
from node.memory.search.pipeline import SearchRequest
from protocol.purchase import Delivery
from tests.fixtures.messages import SELLER, T0_MS, sample_listing

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SCRATCH = "memory/default/scratch.md"
DIRECTIVE = "the user never wants semicolons at the end of lines"
NOTE = "the user asked about the staging cluster on tuesday"


def data_dir(tmp_path, policy: str) -> NodeConfig:  # type: ignore[no-untyped-def]
    return load_config(tmp_path / policy, environ={},
                       overrides={"memory": {"embedder": "hashing", "policy": policy}})


def as_note(memory: Memory, text: str, semantic_type: SemanticType, at_ms: int) -> str:
    """A crystal shaped like a working-memory note (origin session, the scratch path, importance
    0.75) but without a note's importance floor: ordinary material, which decays (a real note
    lasts: tests/integration/memory/test_memory_what_lasts.py)."""
    crystal = memory.prepare(text, semantic_type=semantic_type, origin=Origin.SESSION, path=SCRATCH,
                             created_at_ms=at_ms)
    crystal.importance_score = 0.75
    return str(memory.add_crystals([crystal])[0].id)


@pytest.mark.parametrize("policy", ["importance", "energy"])
def test_a_directive_survives_a_simulated_year_and_an_ordinary_note_decays_as_before(
        tmp_path, policy: str) -> None:  # type: ignore[no-untyped-def]
    memory = Memory(data_dir(tmp_path, policy))
    try:
        directive = as_note(memory, DIRECTIVE, SemanticType.DIRECTIVE, T0_MS)
        note = as_note(memory, NOTE, SemanticType.GENERAL, T0_MS)
        note_expired_on: float | None = None
        # Hourly cycles for the first two days (the energy policy forgets within hours), then daily.
        times = [T0_MS + h * HOUR_MS for h in range(1, 48)] + [T0_MS + d * DAY_MS for d in range(2, 366)]
        for at in times:
            memory.consolidate(now=at)
            kept = memory.store.get(directive)
            assert kept.lifecycle in (Lifecycle.GENERATED, Lifecycle.ACTIVATED), at
            if policy == "importance":
                assert kept.importance_score >= 0.5
            if note_expired_on is None and memory.store.get(note).lifecycle is Lifecycle.EXPIRED:
                note_expired_on = (at - T0_MS) / DAY_MS
        assert memory.store.get(directive).lifecycle is not Lifecycle.ARCHIVED
        # As before: ~37 days from 0.095 to the forget threshold (a little more: emotion and the
        # resting hormones slow decay), or the idle energy of a few hours.
        assert note_expired_on is not None
        if policy == "importance":
            assert 36 <= note_expired_on <= 42
            assert memory.store.get(directive).importance_score == pytest.approx(0.5)
        else:
            assert note_expired_on <= 0.25
        [hit] = memory.search(SearchRequest("semicolons at the end of lines", k=1))
        assert hit.crystal.id == directive
        assert hit.crystal.to_dict()["epistemicLayer"] == "directive"
    finally:
        memory.close()


def test_a_doubted_directive_is_not_evicted(memory: Memory) -> None:
    directive = memory.add(DIRECTIVE, semantic_type=SemanticType.DIRECTIVE, created_at_ms=T0_MS).id
    for _ in range(4):  # 1.0 → 0.0625, far below the minimum confidence 0.2
        memory.learning.feedback(directive, "wrong", at_ms=T0_MS)
    memory.consolidate(now=T0_MS + DAY_MS)
    assert memory.store.get(directive).lifecycle is not Lifecycle.EXPIRED


# --- conflicts: directive > world fact > experience -----------------------------------------------


def ranked(memory: Memory, query: str) -> list[str]:
    return [hit.crystal.text for hit in memory.search(SearchRequest(query, k=5, record_access=False))]


def test_on_a_conflict_the_directive_outranks_the_experience_and_the_inferred_fact(memory: Memory) -> None:
    experience = "the user wants semicolons at the end of lines in the deploy script"
    fact = "Learned from experience: the user wants semicolons at the end of lines"
    memory.add(experience, semantic_type=SemanticType.EPISODE)
    memory.add(fact, semantic_type=SemanticType.FACT)
    memory.add(DIRECTIVE, semantic_type=SemanticType.DIRECTIVE)
    memory.add("the cat slept on the warm windowsill", semantic_type=SemanticType.EPISODE)
    order = ranked(memory, "does the user want semicolons at the end of lines in the deploy script")
    # The directive contradicts both; the fact and the experience agree, so relevance orders them.
    assert order[:3] == [DIRECTIVE, experience, fact]


def test_a_world_fact_outranks_a_conflicting_experience_but_not_an_unrelated_one(memory: Memory) -> None:
    experience = "deploys run on fridays at noon after the standup"
    fact = "deploys do not run on fridays"
    unrelated = "the deploy pipeline runs tests at noon after the standup"
    for text, semantic_type in ((experience, SemanticType.EPISODE), (fact, SemanticType.FACT),
                                (unrelated, SemanticType.EPISODE)):
        memory.add(text, semantic_type=semantic_type)
    order = ranked(memory, "deploys run on fridays at noon after the standup")
    assert order.index(fact) < order.index(experience)
    # Relevance still decides where nothing conflicts: the fact passes only what it contradicts.
    before = ranked(memory, "the deploy pipeline runs tests at noon after the standup")
    assert before[0] == unrelated


# --- bought knowledge -----------------------------------------------------------------------------

STRESS = "urgent: fail, error, crash, bug, deadline! parse the nginx access logs and count the 5xx lines"
OWN = "parse the nginx access logs and count the 5xx lines per hour"


def bought(text: str) -> object:
    stored = StoredListing(listing=sample_listing(), seller_key=SELLER.public_key, issued_at_ms=T0_MS,
                           received_at_ms=T0_MS, superseded_by=None, own_crystal_id=None, envelope=b"")
    from node.crystals import content_hash

    delivery = Delivery("0f" * 16, stored.listing.listing_id, text, content_hash(text), "0x" + "ab" * 32)
    return imported_skill(stored, delivery, management_keys=())


def test_bought_text_full_of_stress_words_leaves_the_hormones_unchanged(tmp_path) -> None:  # type: ignore[no-untyped-def]
    memory = Memory(data_dir(tmp_path, "importance"))
    try:
        memory.hormones.now_ms = lambda: T0_MS  # a still clock: only a spike could move a level
        memory.hormones.updated_at_ms = T0_MS
        before = memory.hormones.state()
        skill = bought(STRESS)
        memory.add_crystals([skill])  # type: ignore[list-item]
        assert memory.hormones.state() == before
        # The same words from the node's own side do spike cortisol (the test can fail).
        memory.add("urgent: the deploy failed with an error", source=Source.MEMORY)
        assert memory.hormones.state().cortisol > before.cortisol
    finally:
        memory.close()


def test_bought_knowledge_enters_at_the_market_confidence_and_ranks_below_own(memory: Memory) -> None:
    skill = bought(OWN)
    [result] = memory.add_crystals([skill])  # type: ignore[list-item]
    stored = memory.store.get(result.id)
    assert stored.acquisition is Acquisition.BOUGHT and stored.seller == SELLER.public_key.hex()
    row = memory.learning.knowledge.get(stored.id)
    assert row is not None and row.provenance is Provenance.BOUGHT and row.signer == SELLER.public_key.hex()
    # No demurrage: a month later it is still at the market's confidence.
    month_later = stored.created_at_ms + 30 * DAY_MS
    assert memory.learning.confidences([stored], month_later)[stored.id] == BOUGHT_CONFIDENCE
    # Only this node's own feedback moves it: 0.2 + 20 % of the doubt, kept as bought.
    rated = memory.learning.feedback(stored.id, "useful", at_ms=month_later)
    assert rated["confidence"] == pytest.approx(0.36)
    assert memory.learning.confidences([stored], month_later + 30 * DAY_MS)[stored.id] == pytest.approx(0.36)
    # The same text, the node's own, in another namespace: equally relevant.
    own = memory.add(OWN, semantic_type=SemanticType.SKILL, namespace="agent:ops")
    hits = memory.search(SearchRequest("parse nginx access logs count 5xx lines", k=2, namespaces=(),
                                       record_access=False))
    assert [hit.crystal.id for hit in hits] == [own.id, stored.id]
    assert hits[0].score > hits[1].score
    marks = hits[1].to_dict()["crystal"]
    assert (marks["provenance"], marks["seller"]) == ("bought", SELLER.public_key.hex())
    assert hits[0].to_dict()["crystal"]["provenance"] == "own"
