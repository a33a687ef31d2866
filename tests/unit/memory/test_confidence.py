"""Confidence formulas (seed 003) against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from node.memory.learning import confidence as c

DAY_MS = c.MS_PER_DAY
TAU_MS = 7 * DAY_MS


def test_stability_is_max_one_ln_episode_count() -> None:
    assert c.stability(0) == 1.0
    assert c.stability(1) == 1.0
    assert c.stability(2) == 1.0  # ln 2 = 0.693 < 1
    assert c.stability(3) == pytest.approx(1.098612, abs=1e-6)  # ln 3
    assert c.stability(50) == pytest.approx(3.912023, abs=1e-6)  # ln 50


def test_retention_after_one_tau() -> None:
    # t = τ: R = e^(-1 / ln 3) = e^(-0.910239) = 0.402428 for 3 episodes,
    # e^(-1 / ln 50) = e^(-0.255622) = 0.774434 for 50 episodes, e^-1 for one.
    assert c.retention(TAU_MS, TAU_MS, 3) == pytest.approx(0.402428, abs=1e-6)
    assert c.retention(TAU_MS, TAU_MS, 50) == pytest.approx(0.774434, abs=1e-6)
    assert c.retention(TAU_MS, TAU_MS, 1) == pytest.approx(math.exp(-1))
    assert c.retention(-5, TAU_MS, 3) == 1.0
    with pytest.raises(ValueError):
        c.retention(1, 0, 3)


def test_fact_born_at_seed_confidence_decays_and_is_evicted() -> None:
    assert c.FACT_BIRTH_CONFIDENCE == 0.7
    # 0.7 × 0.402428 = 0.281700 after one τ with 3 episodes
    now = c.current_confidence(0.7, TAU_MS, TAU_MS, 3)
    assert now == pytest.approx(0.281700, abs=1e-6)
    assert not c.evictable(now, 0.2)
    # eviction below 0.2 once 0.7·e^(-t/(τ ln 3)) < 0.2: t > τ · ln3 · ln3.5 = 9.634 days
    assert not c.evictable(c.current_confidence(0.7, int(9.6 * DAY_MS), TAU_MS, 3), 0.2)
    assert c.evictable(c.current_confidence(0.7, int(9.7 * DAY_MS), TAU_MS, 3), 0.2)


def test_warning_never_below_floor_nor_evictable() -> None:
    assert c.WARNING_FLOOR == 0.3
    late = c.current_confidence(1.0, 1000 * DAY_MS, TAU_MS, 1, warning=True)
    assert late == 0.3
    assert not c.evictable(late, 0.5, warning=True)
    assert c.weaken(0.4, warning=True) == 0.3
    assert c.weaken(0.4) == pytest.approx(0.2)


def test_feedback_and_episode_reinforcement() -> None:
    assert c.reinforce(0.7, c.USEFUL_REINFORCEMENT) == pytest.approx(0.76)  # 0.7 + 0.2·0.3
    assert c.reinforce(0.7, c.EPISODE_REINFORCEMENT) == pytest.approx(0.73)  # 0.7 + 0.1·0.3
    assert c.reinforce(1.0, 0.5) == 1.0


def test_generational_decay_matches_seed_examples() -> None:
    # seed: "0.3 * 0.85^2 = 0.22"; "at generation 5 ... 44% of its original confidence"
    assert c.generational_confidence(0.3, 2) == pytest.approx(0.21675)
    assert c.generational_confidence(1.0, 5) == pytest.approx(0.443705, abs=1e-6)
    assert c.generational_confidence(0.7, 0) == 0.7
    with pytest.raises(ValueError):
        c.generational_confidence(0.7, -1)


def test_ppm_round_trip_and_clamp() -> None:
    assert c.to_ppm(0.7) == 700_000
    assert c.from_ppm(595_000) == pytest.approx(0.595)
    assert c.to_ppm(1.7) == 1_000_000
    assert c.clamp(float("nan")) == 0.0


def test_an_outcome_moves_confidence_a_fifth_of_the_way_to_what_the_run_showed() -> None:
    # c' = c + 0.2·(y − c): a bought skill at 0.2 climbs 0.36, 0.488, 0.5904 (= 1 − 0.8^(n+1))
    value = c.BOUGHT_CONFIDENCE
    for expected in (0.36, 0.488, 0.5904):
        value = c.outcome_confidence(value, True)
        assert value == pytest.approx(expected, abs=1e-12)
    # a failure takes a fifth: 0.36 → 0.288; an own skill (1.0) → 0.8; 0 stays 0, 1 stays 1
    assert c.outcome_confidence(0.36, False) == pytest.approx(0.288, abs=1e-12)
    assert c.outcome_confidence(1.0, False) == pytest.approx(0.8, abs=1e-12)
    assert c.outcome_confidence(0.0, False) == 0.0
    assert c.outcome_confidence(1.0, True) == 1.0


def test_outcomes_stay_bounded_whatever_comes_in() -> None:
    for start in (-3.0, 0.0, 0.37, 1.0, 7.0, math.nan):
        for success in (True, False):
            value = c.outcome_confidence(start, success)
            assert 0.0 <= value <= 1.0
    value = 0.5
    for _ in range(500):
        value = c.outcome_confidence(value, False)
    assert 0.0 <= value < 1e-40
    assert c.outcome_confidence(0.3, False, warning=True) == c.WARNING_FLOOR
