"""Outcomes teach (issue 35, item 3) on a real data dir: a recorded run of a skill moves its
confidence (and so its rank) in the transaction that counts it, and fires seed 000's reward /
error hormone event; a bought skill climbs from the market's 0.2 through its own successes."""

from __future__ import annotations

import pytest

from node.crystals import SemanticType
from node.crystals.store import CrystalNotFound, StoreError
from node.memory.facade import Memory
from node.memory.learning.confidence import BOUGHT_CONFIDENCE
from node.memory.learning.knowledge import Provenance
from node.memory.search.pipeline import SearchRequest
from tests.fixtures.messages import T0_MS
from tests.support.market import bought

DAY_MS = 24 * 3_600_000
OWN = "parse the nginx access logs and count the 5xx lines per hour"


def still_hormones(memory: Memory) -> None:
    """A clock that never moves: only an event can change a level."""
    memory.hormones.now_ms = lambda: T0_MS
    memory.hormones.updated_at_ms = T0_MS


def test_a_bought_skill_climbs_through_its_successes_and_falls_through_failures(memory: Memory) -> None:
    [result] = memory.add_crystals([bought(OWN)])
    skill = memory.store.get(result.id)
    assert memory.learning.confidences([skill])[skill.id] == BOUGHT_CONFIDENCE
    seen = []
    for success in (True, True, False):
        outcome = memory.record_execution(skill.id, success)
        seen.append((round(outcome.confidence_before, 6), round(outcome.confidence, 6)))
    # 0.2 → 0.36 → 0.488 (c + 0.2·(1 − c)), then a failure takes a fifth: 0.3904
    assert seen == [(0.2, 0.36), (0.36, 0.488), (0.488, 0.3904)]
    assert outcome.crystal.execution.executions == 3 and outcome.crystal.execution.successes == 2
    row = memory.learning.knowledge.get(skill.id)
    assert row is not None and row.provenance is Provenance.BOUGHT and row.signer == skill.seller
    # No demurrage: a month later it is where its runs left it.
    later = row.reference_ms + 30 * DAY_MS
    assert memory.learning.confidences([skill], later)[skill.id] == pytest.approx(0.3904)
    actions = [a["action"] for a in memory.store.audit_log(skill.id, 50)]
    assert actions.count("outcome_success") == 2 and actions.count("outcome_failure") == 1
    assert outcome.to_dict()["confidence"] == 0.3904


def test_an_own_skill_starts_at_full_confidence_and_keeps_what_its_runs_show(memory: Memory) -> None:
    skill = memory.add("bisect the regression between two tags", semantic_type=SemanticType.SKILL)
    assert memory.learning.knowledge.get(skill.id) is None  # self-learned: 1.0, no row
    outcome = memory.record_execution(skill.id, False)
    assert (outcome.confidence_before, outcome.confidence) == (1.0, pytest.approx(0.8))
    row = memory.learning.knowledge.get(skill.id)
    assert row is not None and row.provenance is Provenance.EXECUTED
    # Skills never decay (seed 000): a year later still 0.8.
    assert memory.learning.confidences([skill], row.reference_ms + 365 * DAY_MS)[skill.id] == pytest.approx(0.8)
    assert memory.record_execution(skill.id, True).confidence == pytest.approx(0.84)


def test_success_spikes_dopamine_and_failure_cortisol_even_for_a_bought_skill(memory: Memory) -> None:
    still_hormones(memory)
    [result] = memory.add_crystals([bought(OWN)])
    before = memory.hormones.state()
    assert memory.record_execution(result.id, True).hormone_event == "reward"
    after_success = memory.hormones.state()
    assert after_success.dopamine == pytest.approx(before.dopamine + 0.3)
    assert after_success.cortisol == before.cortisol
    assert memory.record_execution(result.id, False).hormone_event == "error"
    after_failure = memory.hormones.state()
    assert after_failure.cortisol == pytest.approx(before.cortisol + 0.3)
    assert after_failure.dopamine == after_success.dopamine


def test_a_refused_outcome_changes_nothing(memory: Memory) -> None:
    still_hormones(memory)
    skill = memory.add("bisect the regression between two tags", semantic_type=SemanticType.SKILL)
    before = memory.hormones.state()
    with pytest.raises(StoreError):
        memory.record_execution(skill.id, True, reward=1.5)
    with pytest.raises(CrystalNotFound):
        memory.record_execution("no-such-skill", False)
    assert memory.learning.knowledge.get(skill.id) is None
    assert memory.store.get(skill.id).execution.executions == 0
    assert memory.hormones.state() == before


def test_outcomes_move_a_skill_in_the_ranking(memory: Memory) -> None:
    text = "rotate the nginx access logs and compress the old ones nightly"
    first = memory.add(text, semantic_type=SemanticType.SKILL, namespace="agent:a")
    second = memory.add(text, semantic_type=SemanticType.SKILL, namespace="agent:b")

    def order() -> list[str]:
        hits = memory.search(SearchRequest("rotate nginx access logs compress", k=2, namespaces=(),
                                           record_access=False))
        return [hit.crystal.id for hit in hits]

    for _ in range(3):  # the first fails three times: 0.512, it ranks second
        memory.record_execution(first.id, False)
    assert order() == [second.id, first.id]
    for _ in range(5):  # now the second fails more: 0.328, the first is back on top
        memory.record_execution(second.id, False)
    assert order() == [first.id, second.id]
