"""When a seller claims a buyer's vouchers (node.market.purchase.channels.claims): worked by
hand from the rule — withdrawal first, then the trust-level bound, then age."""

from __future__ import annotations

import json

from node.config import MarketConfig
from node.market.purchase.channels import SellerChannel, claim_bound, claim_due
from node.trust import TrustLevel

TERMS = json.dumps({"payer": "0x" + "11" * 20, "payer_authorizer": "0x" + "11" * 20,
                    "receiver": "0x" + "22" * 20, "receiver_authorizer": "0x" + "22" * 20,
                    "token": "0x" + "33" * 20, "withdraw_delay_s": 900, "salt": "0x" + "00" * 32})
HOUR_MS = 3_600_000


def channel(charged: int, claimed: int, withdraw_at_s: int = 0,
            first_unclaimed_at_ms: int | None = 0) -> SellerChannel:
    return SellerChannel("0x" + "44" * 32, "0x" + "11" * 20, "ab" * 32, TERMS, charged, "0x" + "1c" * 65,
                         claimed, 1_000_000, withdraw_at_s, 0, first_unclaimed_at_ms, "open", 0)


def test_bounds_follow_the_buyers_trust_level() -> None:
    market = MarketConfig()
    assert claim_bound(market, TrustLevel.TRUSTED) == 1_000_000
    assert claim_bound(market, TrustLevel.PROVISIONAL) == 100_000
    assert claim_bound(market, TrustLevel.UNTRUSTED) == 0


def test_claim_due() -> None:
    now = 10 * HOUR_MS
    assert claim_due(channel(50_000, 50_000), 0, HOUR_MS, now) is None  # nothing unclaimed
    assert claim_due(channel(60_000, 50_000, withdraw_at_s=1), 10**9, HOUR_MS, now) == "withdrawing"
    assert claim_due(channel(160_000, 50_000, first_unclaimed_at_ms=now), 100_000, HOUR_MS, now) == "bound"
    assert claim_due(channel(150_000, 50_000, first_unclaimed_at_ms=now), 100_000, HOUR_MS, now) is None
    assert claim_due(channel(60_000, 50_000, first_unclaimed_at_ms=now - HOUR_MS), 100_000, HOUR_MS,
                     now) == "age"
    assert claim_due(channel(60_000, 50_000, first_unclaimed_at_ms=now - HOUR_MS + 1), 100_000,
                     HOUR_MS, now) is None
