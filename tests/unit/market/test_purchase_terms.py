"""The buyer's spend caps, fresh terms and the trust layer's network view, as pure functions."""

from __future__ import annotations

import dataclasses

import pytest

from node.config import MarketConfig
from node.market.book.listings import StoredListing
from node.market.purchase.errors import PurchaseRefused
from node.market.purchase.terms import check_caps, check_fresh_terms
from node.trust.network_view import network_view
from tests.fixtures.messages import SELLER, T0_MS, sample_listing

MARKET = MarketConfig(max_per_purchase_micro_usdc=500, max_per_day_micro_usdc=1_000)


def test_caps_admit_a_price_that_fits_exactly() -> None:
    check_caps(MARKET, price=400, max_price=400, spent_today=600)  # 600 + 400 = the daily cap


@pytest.mark.parametrize(("price", "max_price", "spent", "code"), [
    (401, 400, 0, "price_above_cap"),     # above --max-price
    (501, None, 0, "price_above_cap"),    # above the per-purchase cap
    (400, None, 601, "daily_cap"),        # 601 + 400 = 1001 > 1000
])
def test_caps_refuse(price: int, max_price: int | None, spent: int, code: str) -> None:
    with pytest.raises(PurchaseRefused) as refused:
        check_caps(MARKET, price, max_price, spent)
    assert refused.value.code == code and not refused.value.money_moved


def test_network_view_weighs_each_row_by_its_reporters_trust() -> None:
    rows = {
        "me": {"a": 1.0},                       # our own row: the local term, not counted
        "a": {"b": 0.5, "c": 0.0, "a": 1.0},     # self-entry ignored
        "m": {"b": 1.0},
    }
    trust = {"me": 0.5, "a": 0.3, "m": 0.2}
    view = network_view(rows, trust, "me", pretrusted={"me", "m"})
    assert view.vouch == {"b": 0.3 + 0.2}
    assert view.distrust == {"c": 0.3}
    assert view.incoming == {"a", "b"}
    assert view.informative  # 0.3 of the mass sits outside the pre-trusted peers
    assert view.global_trust("a") == 0.3 and view.global_trust("m") is None


def test_network_view_is_uninformative_when_trust_stays_with_the_pretrusted() -> None:
    view = network_view({"m": {"b": 1.0}}, {"m": 0.995, "b": 0.005}, "me", pretrusted={"m"})
    assert not view.informative and view.global_trust("b") is None


HELD = StoredListing(listing=sample_listing(), seller_key=SELLER.public_key, issued_at_ms=T0_MS,
                     received_at_ms=T0_MS, superseded_by=None, own_crystal_id=None, envelope=b"")
PAID, PAID_TO = 10_000, HELD.listing.pay_to


def test_fresh_terms_within_the_ceiling_replace_the_refused_ones() -> None:
    fresh = dataclasses.replace(HELD.listing, price_micro_usdc=12_000)
    assert check_fresh_terms(HELD, SELLER.public_key, fresh, PAID, PAID_TO, 12_000, T0_MS) == fresh


@pytest.mark.parametrize(("changes", "signer", "ceiling", "code"), [
    ({"price_micro_usdc": 12_001}, None, 12_000, "price_changed"),       # above the ceiling
    ({}, None, 20_000, "terms_mismatch"),                                 # refused its own terms
    ({"content_hash": "cd" * 32, "price_micro_usdc": 9_000}, None, 20_000, "terms_mismatch"),
    ({"price_micro_usdc": 9_000, "expires_at_ms": T0_MS}, None, 20_000, "terms_mismatch"),
    ({"price_micro_usdc": 9_000}, b"\x01" * 32, 20_000, "terms_mismatch"),  # another key signed
])
def test_fresh_terms_that_may_not_be_signed_end_the_purchase_unpaid(
        changes: dict[str, object], signer: bytes | None, ceiling: int, code: str) -> None:
    fresh = dataclasses.replace(HELD.listing, **changes)  # type: ignore[arg-type]
    with pytest.raises(PurchaseRefused) as refused:
        check_fresh_terms(HELD, signer or SELLER.public_key, fresh, PAID, PAID_TO, ceiling, T0_MS)
    assert refused.value.code == code and not refused.value.money_moved
