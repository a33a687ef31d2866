"""Skill pricing engine (seed 000, marketplace economics).

Prices are integers in micro-USDC (6 decimals). Floats are used only for the
multipliers; the result is rounded half-to-even once and clamped, so the same
inputs always give the same integer on every node.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Protocol

from node.config import MarketConfig

DEFAULT_BASE_MICRO_USDC = MarketConfig.base_price_micro_usdc
DEFAULT_MIN_MICRO_USDC = MarketConfig.min_price_micro_usdc
DEFAULT_MAX_MICRO_USDC = MarketConfig.max_price_micro_usdc
DEMAND_WEIGHT = 0.1


class Scarcity(StrEnum):
    RARE = "rare"
    UNCOMMON = "uncommon"
    COMMON = "common"

    @property
    def multiplier(self) -> float:
        """Seed: "1.5x for rare skill types, 1.2x for uncommon, 1.0x for common"."""
        return _SCARCITY_MULTIPLIER[self]


_SCARCITY_MULTIPLIER = {Scarcity.RARE: 1.5, Scarcity.UNCOMMON: 1.2, Scarcity.COMMON: 1.0}

RARE_BELOW = 3
"""Fewer than 3 similar listings on the market: rare."""
UNCOMMON_BELOW = 10
"""3 to 9 similar listings: uncommon; 10 or more: common."""


def scarcity_for(similar_listing_count: int) -> Scarcity:
    """Scarcity from how many *other* live listings offer a similar skill.

    The seed names the three tiers but not their bounds. We use 0–2 → rare,
    3–9 → uncommon, ≥ 10 → common: a skill nobody else sells earns the full 1.5×,
    and the bonus is gone once the category is crowded. "Similar" is the caller's
    call (same skill category, or embedding neighbours in the listing book).
    """
    if similar_listing_count < 0:
        raise ValueError("similar_listing_count must be >= 0")
    if similar_listing_count < RARE_BELOW:
        return Scarcity.RARE
    if similar_listing_count < UNCOMMON_BELOW:
        return Scarcity.UNCOMMON
    return Scarcity.COMMON


class ReputationSource(Protocol):
    """Where the pricing engine gets a seller's reputation multiplier (0–1)."""

    def reputation(self, seller_key: bytes) -> float: ...


@dataclass(frozen=True)
class FlatReputation:
    """Every seller gets the same reputation; the default before trust is known."""

    value: float = 1.0

    def reputation(self, seller_key: bytes) -> float:
        return self.value


@dataclass(frozen=True)
class PriceBreakdown:
    """Every factor of a price, for the CLI and dashboard."""

    base_micro_usdc: int
    success_rate: float
    avg_reward: float
    quality: float
    demand: float
    reputation: float
    scarcity: Scarcity
    scarcity_multiplier: float
    raw_micro_usdc: float
    price_micro_usdc: int
    clamped: str | None  # "min", "max" or None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["scarcity"] = self.scarcity.value
        return out


def quote(
    *,
    base_micro_usdc: int = DEFAULT_BASE_MICRO_USDC,
    successes: int,
    executions: int,
    avg_reward: float,
    unique_buyers: int,
    bounty_matches: int = 0,
    reputation: float = 1.0,
    scarcity: Scarcity = Scarcity.COMMON,
    min_micro: int = DEFAULT_MIN_MICRO_USDC,
    max_micro: int = DEFAULT_MAX_MICRO_USDC,
) -> PriceBreakdown:
    """Price with its breakdown.

    Seed: price = base × quality (successRate × avgRewardScore) × demand
    (1 + log(uniqueBuyers + bountyMatches + 1) × 0.1) × reputation × scarcity
    (1.5 rare / 1.2 uncommon / 1.0 common); ``log`` is the natural log.

    ``avg_reward`` and ``reputation`` are clamped to [0, 1] and [0, ∞). With no
    executions quality is 0, so the price falls to ``min_micro``.
    """
    if executions < 0 or successes < 0 or successes > executions:
        raise ValueError(f"need 0 <= successes <= executions, got {successes}/{executions}")
    if unique_buyers < 0 or bounty_matches < 0:
        raise ValueError("unique_buyers and bounty_matches must be >= 0")
    if base_micro_usdc < 0 or min_micro < 0 or min_micro > max_micro:
        raise ValueError("need base >= 0 and 0 <= min_micro <= max_micro")
    success_rate = successes / executions if executions else 0.0
    reward = min(1.0, max(0.0, avg_reward))
    quality = success_rate * reward
    demand = 1 + math.log(unique_buyers + bounty_matches + 1) * DEMAND_WEIGHT
    seller = max(0.0, reputation)
    raw = base_micro_usdc * quality * demand * seller * scarcity.multiplier
    rounded = round(raw)  # Python rounds half to even
    clamped: str | None = None
    if rounded < min_micro:
        price, clamped = min_micro, "min"
    elif rounded > max_micro:
        price, clamped = max_micro, "max"
    else:
        price = rounded
    return PriceBreakdown(
        base_micro_usdc=base_micro_usdc,
        success_rate=success_rate,
        avg_reward=reward,
        quality=quality,
        demand=demand,
        reputation=seller,
        scarcity=scarcity,
        scarcity_multiplier=scarcity.multiplier,
        raw_micro_usdc=raw,
        price_micro_usdc=price,
        clamped=clamped,
    )


def price_micro_usdc(
    *,
    base_micro_usdc: int = DEFAULT_BASE_MICRO_USDC,
    successes: int,
    executions: int,
    avg_reward: float,
    unique_buyers: int,
    bounty_matches: int = 0,
    reputation: float = 1.0,
    scarcity: Scarcity = Scarcity.COMMON,
    min_micro: int = DEFAULT_MIN_MICRO_USDC,
    max_micro: int = DEFAULT_MAX_MICRO_USDC,
) -> int:
    """The integer price in micro-USDC; see :func:`quote` for the formula."""
    return quote(
        base_micro_usdc=base_micro_usdc,
        successes=successes,
        executions=executions,
        avg_reward=avg_reward,
        unique_buyers=unique_buyers,
        bounty_matches=bounty_matches,
        reputation=reputation,
        scarcity=scarcity,
        min_micro=min_micro,
        max_micro=max_micro,
    ).price_micro_usdc
