"""Dreams that write knowledge (issue 35, item 2) on a real data dir, deterministic synthesiser.

A dream turns the facts, preferences, decisions and open questions of its new notes and
session turns into insight crystals (origin ``dream``) linked to their sources, at seed
003's confidence floor 0.3; a later dream that reads one again confirms it; the rest
expire on the seed's 14-day schedule; every crystal a dream read counts ``dreamCount``.
"""

from __future__ import annotations

import pytest

from node.config import NodeConfig
from node.crystals import Lifecycle, LifespanPolicy, Origin, SemanticType, Source, now_ms
from node.memory.facade import Memory
from node.memory.learning.dreaming import InsightWithoutSource, Material, apply_findings
from node.memory.learning.insights import Candidate, InsightKind, SourceText
from node.memory.learning.knowledge import Provenance
from node.memory.working.backend import MemoryBackend
from node.memory.working.working import WorkingMemory
from tests.support.clock import HandClock

DAY_MS = 24 * 3_600_000
NOTES = [
    "I prefer tabs over spaces in every repository",
    "We decided to keep the billing ledger in Postgres",
    "Should we shard the session cache by tenant?",
    "The API migration deadline is March 20",
    "the coffee machine on floor two was cleaned",  # states nothing: no insight
]


def insights_of(memory: Memory) -> dict[str, str]:
    """Live dream insights: text → id."""
    crystals = memory.store.list_crystals(limit=200)
    return {c.text: c.id for c in crystals if c.origin is Origin.DREAM
            and c.lifecycle not in (Lifecycle.EXPIRED, Lifecycle.ARCHIVED)}


def dreamer(memory: Memory, config: NodeConfig, clock: HandClock) -> WorkingMemory:
    return WorkingMemory(config.data_dir, MemoryBackend(memory), clock=clock)


def test_a_dream_writes_linked_insights_at_the_floor_and_counts_its_dreams(
        memory: Memory, node_config: NodeConfig) -> None:
    clock = HandClock(now_ms())
    wm = dreamer(memory, node_config, clock)
    noted = {text: wm.note(text, 0.8).crystal_id for text in NOTES}

    result = wm.dream()

    assert result.status == "written" and result.dream_count == 1 and result.last_dreamed_at_ms == clock.now
    assert result.insights["created"] == 4 and result.insights["read"] == 5
    found = insights_of(memory)
    assert set(found) == {
        "Preference: I prefer tabs over spaces in every repository",
        "Decision: We decided to keep the billing ledger in Postgres",
        "Question: Should we shard the session cache by tenant?",
        "Fact: The API migration deadline is March 20",
    }
    for text, insight_id in found.items():
        crystal = memory.store.get(insight_id)
        statement = text.split(": ", 1)[1]
        [source] = [crystal_id for note, crystal_id in noted.items() if note == statement]
        # linked to its source three ways: the insight table, the provenance DAG, `memory get`
        assert memory.learning.insights.sources(insight_id) == [source]
        assert crystal.provenance_dag[0].parent_ids == [source]
        detail = memory.learning.describe(crystal)
        assert detail["insight"]["sources"] == [source] and detail["confidence"] == 0.3
        assert crystal.semantic_type is SemanticType.INSIGHT
        assert crystal.to_dict()["epistemicLayer"] == "mental_model"
        assert crystal.governance.lifespan_policy is LifespanPolicy.TTL
        assert crystal.expires_at_ms == clock.now + 14 * DAY_MS
        row = memory.learning.knowledge.get(insight_id)
        assert row is not None and row.provenance is Provenance.DREAM and row.confidence == 0.3
        assert detail["dreamCount"] == 1 and detail["lastDreamedAt"] == clock.now
    # every note the dream read counts one dream, the plain one too
    plain = memory.store.get(noted[NOTES[-1]])
    assert memory.learning.describe(plain)["dreamCount"] == 1

    clock.now += 3_600_000
    again = wm.dream()  # nothing new: nothing sighted twice, no new insight
    assert again.dream_count == 2 and again.insights["created"] == 0 and again.insights["sighted"] == 0
    assert memory.learning.describe(plain)["dreamCount"] == 1  # not read again


def test_a_later_sighting_confirms_an_insight_and_the_unconfirmed_expire(
        memory: Memory, node_config: NodeConfig) -> None:
    clock = HandClock(now_ms())
    wm = dreamer(memory, node_config, clock)
    for text in NOTES:
        wm.note(text, 0.8)
    wm.dream()
    found = insights_of(memory)
    preference = found["Preference: I prefer tabs over spaces in every repository"]
    decision = found["Decision: We decided to keep the billing ledger in Postgres"]

    clock.now += 3 * DAY_MS  # within the seed's 7-day window
    later = wm.note("Again: I prefer tabs over spaces in every repository", 0.8).crystal_id
    result = wm.dream()
    assert result.insights["sighted"] == 1 and result.insights["confirmed"] == 1
    assert result.insights["created"] == 0  # the same insight, not a second one
    crystal = memory.store.get(preference)
    assert crystal.governance.lifespan_policy is LifespanPolicy.DECAY and crystal.expires_at_ms is None
    assert later in memory.learning.insights.sources(preference)
    assert memory.learning.confidences([crystal], clock.now)[preference] == pytest.approx(0.44)  # 0.3 + 0.2·0.7

    memory.consolidate(now=clock.now + 15 * DAY_MS)  # past the 14-day TTL of the others
    assert memory.store.get(decision).lifecycle is Lifecycle.EXPIRED
    assert memory.store.get(preference).lifecycle is not Lifecycle.EXPIRED


def test_a_sighting_after_the_window_renews_the_trial_without_confirming(
        memory: Memory, node_config: NodeConfig) -> None:
    clock = HandClock(now_ms())
    wm = dreamer(memory, node_config, clock)
    wm.note(NOTES[1], 0.8)
    wm.dream()
    [decision] = insights_of(memory).values()
    clock.now += 10 * DAY_MS
    wm.note("As we said: we decided to keep the billing ledger in Postgres", 0.8)
    result = wm.dream()
    assert result.insights["sighted"] == 1 and result.insights["confirmed"] == 0
    crystal = memory.store.get(decision)
    assert crystal.governance.lifespan_policy is LifespanPolicy.TTL
    assert crystal.expires_at_ms == clock.now + 14 * DAY_MS  # 14 days from the latest sighting


def test_the_users_feedback_confirms_an_insight(memory: Memory, node_config: NodeConfig) -> None:
    clock = HandClock(now_ms())
    wm = dreamer(memory, node_config, clock)
    wm.note(NOTES[3], 0.8)
    wm.dream()
    [fact] = insights_of(memory).values()
    rated = memory.learning.feedback(fact, "useful", at_ms=clock.now)
    assert rated["confidence"] == pytest.approx(0.44)
    crystal = memory.store.get(fact)
    assert crystal.governance.lifespan_policy is LifespanPolicy.DECAY and crystal.expires_at_ms is None
    assert memory.learning.describe(crystal)["insight"]["confirmed_at_ms"] == clock.now


def test_session_turns_are_mined_but_not_the_assistants_nor_files(memory: Memory, node_config: NodeConfig) -> None:
    from node.memory.conversations import ingest_conversation

    clock = HandClock(now_ms())
    wm = dreamer(memory, node_config, clock)
    transcript = (b'[{"speaker": "Priya", "text": "My name is Priya and I prefer dark roast coffee."},'
                  b' {"speaker": "assistant", "text": "I prefer to check the logs first."}]')
    ingest_conversation(memory, transcript)
    memory.add("I prefer vim keybindings everywhere", source=Source.FILES, origin=Origin.INDEXED,
               path="/home/p/notes.md")
    wm.dream()
    texts = set(insights_of(memory))
    assert "Preference (Priya): My name is Priya and I prefer dark roast coffee." in texts
    assert not any("check the logs" in text or "vim" in text for text in texts)


def test_an_insight_without_a_source_is_refused_and_nothing_is_written(memory: Memory) -> None:
    source = memory.add("I prefer tabs over spaces in every repository", origin=Origin.SESSION)
    material = Material([SourceText(source.id, source.text)], {}, 10, False)
    good = Candidate(InsightKind.PREFERENCE, source.text, None, [source.id])
    orphan = Candidate(InsightKind.FACT, "The API migration deadline is March 20", None, [])
    with pytest.raises(InsightWithoutSource):
        apply_findings(memory, memory.learning, "default", material, [good, orphan], {}, now_ms())
    assert memory.learning.insights.live("default", now_ms()) == []
    assert memory.learning.insights.mark(source.id) is None
    assert memory.store.get_meta("insights:default:cursor") is None
