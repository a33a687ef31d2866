"""The Sybil simulation (pure): 10 honest + 5 malicious peers, see node.trust.simulation."""

from __future__ import annotations

from node.trust.simulation import SybilScenario, simulate


def test_malicious_clique_is_below_provisional_everywhere_and_honest_peers_are_not() -> None:
    result = simulate(SybilScenario(honest=10, malicious=5, rounds=5, seed=1))
    assert result.rounds_needed is not None and result.rounds_needed <= 3
    final = result.rounds[-1]
    assert final.defended
    assert set(final.malicious_levels) <= {"untrusted", "banned"}
    assert sum(final.malicious_levels.values()) == 10 * 5
    assert "untrusted" not in final.honest_levels and "banned" not in final.honest_levels
    assert final.poisoned_purchases == 0
    assert final.malicious_global_share == 0.0


def test_defence_holds_without_management_nodes_thanks_to_self_pretrust() -> None:
    result = simulate(SybilScenario(management=0, rounds=6, seed=2))
    assert result.rounds_needed is not None
    assert result.rounds[-1].defended
