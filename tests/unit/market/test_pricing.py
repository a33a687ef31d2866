from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.market.selling.pricing import (
    FlatReputation,
    ReputationSource,
    Scarcity,
    price_micro_usdc,
    quote,
    scarcity_for,
)


def test_quality_only_by_hand() -> None:
    # 10_000 × (3/4 × 0.8 = 0.6) × (1 + ln(0 + 0 + 1)·0.1 = 1) × 1 × 1.0 = 6_000
    assert price_micro_usdc(successes=3, executions=4, avg_reward=0.8, unique_buyers=0) == 6_000


def test_demand_reputation_and_scarcity_by_hand() -> None:
    common: dict[str, Any] = dict(successes=3, executions=4, avg_reward=0.8, unique_buyers=3)
    # demand = 1 + ln(4)·0.1 = 1 + 1.3862944·0.1 = 1.1386294
    # 10_000 × 0.6 × 1.1386294 = 6_831.78 → 6_832
    assert price_micro_usdc(**common, scarcity=Scarcity.COMMON) == 6_832
    # × 1.5 (rare) = 10_247.66 → 10_248
    assert price_micro_usdc(**common, scarcity=Scarcity.RARE) == 10_248
    # × 0.5 reputation = 3_415.89 → 3_416
    assert price_micro_usdc(**common, reputation=0.5) == 3_416


def test_bounty_matches_count_as_demand() -> None:
    # quality 10/10 × 1.0 = 1; demand = 1 + ln(5 + 4 + 1)·0.1 = 1 + 2.3025851·0.1 = 1.2302585
    # 10_000 × 1.2302585 × 1.2 (uncommon) = 14_763.10 → 14_763
    breakdown = quote(
        successes=10,
        executions=10,
        avg_reward=1.0,
        unique_buyers=5,
        bounty_matches=4,
        scarcity=Scarcity.UNCOMMON,
    )
    assert breakdown.demand == pytest.approx(1.2302585)
    assert breakdown.raw_micro_usdc == pytest.approx(14_763.10, abs=0.01)
    assert breakdown.price_micro_usdc == 14_763
    assert breakdown.clamped is None
    assert breakdown.to_dict()["scarcity"] == "uncommon"


def test_rounds_half_to_even() -> None:
    # 10_001 × (1/2 × 1.0) = 5_000.5 → 5_000 (even); 10_003 × 0.5 = 5_001.5 → 5_002
    half: dict[str, Any] = dict(successes=1, executions=2, avg_reward=1.0, unique_buyers=0)
    assert price_micro_usdc(base_micro_usdc=10_001, **half) == 5_000
    assert price_micro_usdc(base_micro_usdc=10_003, **half) == 5_002


def test_no_executions_falls_to_the_minimum() -> None:
    breakdown = quote(successes=0, executions=0, avg_reward=0.9, unique_buyers=100)
    assert breakdown.quality == 0.0
    assert (breakdown.price_micro_usdc, breakdown.clamped) == (1_000, "min")


def test_clamped_to_the_maximum() -> None:
    # 1_000_000 × 1 × 1 × 1 × 1.5 = 1_500_000 → 1_000_000
    breakdown = quote(
        base_micro_usdc=1_000_000,
        successes=5,
        executions=5,
        avg_reward=1.0,
        unique_buyers=0,
        scarcity=Scarcity.RARE,
    )
    assert (breakdown.price_micro_usdc, breakdown.clamped) == (1_000_000, "max")


def test_avg_reward_is_clamped_to_unit_interval() -> None:
    args: dict[str, Any] = dict(successes=4, executions=4, unique_buyers=0)
    assert price_micro_usdc(avg_reward=7.0, **args) == 10_000
    assert price_micro_usdc(avg_reward=-1.0, **args) == 1_000


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(successes=5, executions=4),
        dict(successes=-1, executions=4),
        dict(successes=1, executions=4, unique_buyers=-1),
        dict(successes=1, executions=4, min_micro=10, max_micro=5),
    ],
)
def test_rejects_impossible_inputs(kwargs: dict[str, Any]) -> None:
    params: dict[str, Any] = dict(avg_reward=1.0, unique_buyers=0) | kwargs
    with pytest.raises(ValueError):
        price_micro_usdc(**params)


@pytest.mark.parametrize(
    ("count", "scarcity"),
    [
        (0, Scarcity.RARE),
        (2, Scarcity.RARE),
        (3, Scarcity.UNCOMMON),
        (9, Scarcity.UNCOMMON),
        (10, Scarcity.COMMON),
        (500, Scarcity.COMMON),
    ],
)
def test_scarcity_thresholds(count: int, scarcity: Scarcity) -> None:
    assert scarcity_for(count) == scarcity


def test_scarcity_multipliers() -> None:
    assert [s.multiplier for s in Scarcity] == [1.5, 1.2, 1.0]


def test_flat_reputation_is_a_reputation_source() -> None:
    source: ReputationSource = FlatReputation()
    assert source.reputation(b"\x01" * 32) == 1.0
    assert FlatReputation(0.4).reputation(b"") == 0.4


@given(
    executions=st.integers(0, 1_000),
    data=st.data(),
    avg_reward=st.floats(-2, 2),
    buyers=st.integers(0, 10_000),
    reputation=st.floats(0, 1),
    scarcity=st.sampled_from(Scarcity),
)
def test_price_is_an_integer_within_bounds(
    executions: int,
    data: st.DataObject,
    avg_reward: float,
    buyers: int,
    reputation: float,
    scarcity: Scarcity,
) -> None:
    successes = data.draw(st.integers(0, executions))
    price = price_micro_usdc(
        successes=successes,
        executions=executions,
        avg_reward=avg_reward,
        unique_buyers=buyers,
        reputation=reputation,
        scarcity=scarcity,
    )
    assert isinstance(price, int)
    assert 1_000 <= price <= 1_000_000
