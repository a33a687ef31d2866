"""What the buyer checks before it signs: the seller's quote against its listing, fresh
terms against the purchase they replace, and the spend caps of ``[market]``. Pure
functions of plain values; all raise ``PurchaseRefused``, so nothing is signed or
recorded when they fail."""

from __future__ import annotations

import time

from node.chain import TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION
from node.config import MarketConfig
from node.market.book import StoredListing
from node.market.purchase.errors import PurchaseRefused
from protocol.messages import PaymentRequirements, SkillListing

# A quote that expires sooner than this is refused: it could lapse in flight.
MIN_QUOTE_VALIDITY_S = 30


def check_requirements(stored: StoredListing, req: PaymentRequirements) -> None:
    """Refuse a quote whose terms differ from the listing the buyer chose."""
    listing = stored.listing
    problems = []
    if req.listing_id != listing.listing_id:
        problems.append("listing id")
    if req.price_micro_usdc != listing.price_micro_usdc:
        problems.append(f"price {req.price_micro_usdc} != listed {listing.price_micro_usdc}")
    if req.pay_to.lower() != listing.pay_to.lower():
        problems.append("pay-to address")
    if req.asset.lower() != listing.token_address.lower() or req.chain_id != listing.chain_id:
        problems.append("asset/chain")
    if req.content_hash != listing.content_hash:
        problems.append("content hash")
    # We sign under USDC's EIP-712 domain: terms naming another would not settle.
    if (req.extra.name, req.extra.version) != (TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION):
        problems.append(f"token domain {req.extra.name!r}/{req.extra.version!r}")
    if req.valid_before_s <= int(time.time()) + MIN_QUOTE_VALIDITY_S:
        problems.append("quote already expiring")
    if problems:
        raise PurchaseRefused("seller's terms differ from its listing: " + ", ".join(problems),
                              "terms_mismatch")


def check_fresh_terms(stored: StoredListing, signer: bytes, fresh: object, paid_micro_usdc: int,
                      paid_to: str, ceiling_micro_usdc: int, now_ms: int) -> SkillListing:
    """The listing a ``TermsChanged`` carries, if the buyer may sign it in place of the one it
    paid against: the same seller, the same skill version and content, still live, terms that
    really differ, and a price within ``ceiling_micro_usdc`` (``--max-price``, or the price
    the buyer chose when none was given). Anything else ends the purchase, unpaid."""
    listing = stored.listing
    if signer != stored.seller_key or not isinstance(fresh, SkillListing):
        raise PurchaseRefused("the seller's fresh terms are not a listing signed by the seller",
                              "terms_mismatch")
    if (fresh.listing_id, fresh.content_hash, fresh.chain_id, fresh.token_address.lower()) != (
            listing.listing_id, listing.content_hash, listing.chain_id,
            listing.token_address.lower()):
        raise PurchaseRefused("the seller now offers another skill version, chain or token; "
                              "nothing was paid", "terms_mismatch")
    if fresh.expires_at_ms <= now_ms:
        raise PurchaseRefused("the seller's fresh listing has expired; nothing was paid",
                              "terms_mismatch")
    if (fresh.price_micro_usdc, fresh.pay_to.lower()) == (paid_micro_usdc, paid_to.lower()):
        raise PurchaseRefused("the seller refused the very terms its signed listing states; "
                              "nothing was paid", "terms_mismatch")
    if fresh.price_micro_usdc > ceiling_micro_usdc:
        raise PurchaseRefused(
            f"the seller re-priced to {fresh.price_micro_usdc} micro-USDC, above the "
            f"{ceiling_micro_usdc} you accepted; nothing was paid (buy again with "
            f"--max-price {fresh.price_micro_usdc} to accept)", "price_changed")
    return fresh


def check_caps(market: MarketConfig, price: int, max_price: int | None, spent_today: int) -> None:
    """Refuse a price above ``--max-price``, the per-purchase cap or what is left of the
    daily cap (``spent_today`` counts every purchase whose money may have moved)."""
    if max_price is not None and price > max_price:
        raise PurchaseRefused(f"price {price} micro-USDC is above --max-price {max_price}",
                              "price_above_cap")
    if price > market.max_per_purchase_micro_usdc:
        raise PurchaseRefused(
            f"price {price} micro-USDC is above the per-purchase cap "
            f"{market.max_per_purchase_micro_usdc} ([market] max_per_purchase_micro_usdc)",
            "price_above_cap")
    if spent_today + price > market.max_per_day_micro_usdc:
        raise PurchaseRefused(
            f"buying would spend {spent_today + price} micro-USDC in 24 h, above the daily cap "
            f"{market.max_per_day_micro_usdc} ([market] max_per_day_micro_usdc)",
            "daily_cap")
