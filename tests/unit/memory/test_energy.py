"""Energy tiers (seed 004) against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from node.memory.learning.energy import (
    MS_PER_HOUR,
    EnergyState,
    Tier,
    TierChange,
    energy_at,
    evaluate,
    half_life_hours,
    initial_state,
)


def test_energy_formula() -> None:
    # E(1 h) = 1.0 · e^(-0.5·1) = 0.606531 in working; + 2 accesses
    assert energy_at(1.0, 0.5, 1.0) == pytest.approx(0.606531, abs=1e-6)
    assert energy_at(1.0, 0.5, 1.0, 2.0) == pytest.approx(2.606531, abs=1e-6)
    assert energy_at(3.0, 0.05, -4) == 3.0


def test_half_lives_match_the_seed_table() -> None:
    assert half_life_hours(Tier.WORKING) == pytest.approx(1.386, abs=1e-3)  # "~1.4 hours"
    assert half_life_hours(Tier.SHORT_TERM) == pytest.approx(13.86, abs=1e-2)  # "~14 hours"
    assert half_life_hours(Tier.LONG_TERM) == pytest.approx(693.1, abs=0.1)  # "~700 hours"


def test_new_memory_starts_at_one_in_working_and_expires_below_point_one() -> None:
    state = initial_state(0)
    assert (state.tier, state.energy) == (Tier.WORKING, 1.0)
    # 4 h: e^-2 = 0.1353 stays; 5 h: e^-2.5 = 0.0821 < 0.1 expires
    assert evaluate(state, 4 * MS_PER_HOUR, 0, None).change is TierChange.STAY
    expired = evaluate(state, 5 * MS_PER_HOUR, 0, None)
    assert expired.change is TierChange.EXPIRED
    assert expired.after.energy == pytest.approx(math.exp(-2.5))
    kept = evaluate(state, 5 * MS_PER_HOUR, 0, None, expirable=False)
    assert kept.change is TierChange.STAY


def test_one_access_promotes_working_at_two() -> None:
    # accessed at once: 1.0 + 1.0 = 2.0 ≥ 2.0 → short-term
    decision = evaluate(initial_state(0), 0, 1, 0)
    assert decision.change is TierChange.PROMOTED
    assert decision.after.tier is Tier.SHORT_TERM
    assert decision.after.energy == pytest.approx(2.0)


def test_session_boundary_lowers_working_threshold_to_one_and_a_half() -> None:
    # accessed after 1 h, evaluated then: e^-0.5 + 1 = 1.6065
    normal = evaluate(initial_state(0), MS_PER_HOUR, 1, MS_PER_HOUR)
    assert normal.change is TierChange.STAY
    assert normal.after.energy == pytest.approx(1.606531, abs=1e-6)
    boundary = evaluate(initial_state(0), MS_PER_HOUR, 1, MS_PER_HOUR, session_boundary=True)
    assert boundary.change is TierChange.PROMOTED


def test_short_term_promotes_at_five_and_long_term_decays_slowly() -> None:
    short = EnergyState(Tier.SHORT_TERM, 4.5, 0, 3)
    # no access for 2 h: 4.5 · e^(-0.1) = 4.0718, stays
    assert evaluate(short, 2 * MS_PER_HOUR, 3, None).change is TierChange.STAY
    # one more access at 0 evaluated at 0: 5.5 → long-term
    promoted = evaluate(short, 0, 4, 0)
    assert promoted.after.tier is Tier.LONG_TERM
    long_state = EnergyState(Tier.LONG_TERM, 5.5, 0, 4)
    # a week: 5.5 · e^(-0.168) = 4.649446, no promotion above long-term
    week = evaluate(long_state, 168 * MS_PER_HOUR, 4, None)
    assert week.change is TierChange.STAY
    assert week.after.energy == pytest.approx(4.649446, abs=1e-6)


def test_access_energy_decays_from_the_last_access() -> None:
    # two accesses at 2 h, evaluated at 4 h in working:
    # 1.0·e^(-2) + 2·e^(-1) = 0.135335 + 0.735759 = 0.871094
    decision = evaluate(initial_state(0), 4 * MS_PER_HOUR, 2, 2 * MS_PER_HOUR)
    assert decision.after.energy == pytest.approx(0.871094, abs=1e-6)
    assert decision.after.access_count == 2
