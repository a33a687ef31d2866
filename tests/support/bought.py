"""A skill as a purchase delivers it: the crystal ``imported_skill`` builds from a signed listing."""

from __future__ import annotations

from node.crystals import Crystal, content_hash
from node.market.book.listings import StoredListing
from node.market.purchase.skill_import import imported_skill
from protocol.purchase import Delivery
from tests.fixtures.messages import SELLER, T0_MS, sample_listing


def bought(text: str) -> Crystal:
    """A bought skill of ``text`` from the fixtures' seller (not yet stored)."""
    stored = StoredListing(listing=sample_listing(), seller_key=SELLER.public_key, issued_at_ms=T0_MS,
                           received_at_ms=T0_MS, superseded_by=None, own_crystal_id=None, envelope=b"")
    delivery = Delivery("0f" * 16, stored.listing.listing_id, text, content_hash(text), "0x" + "ab" * 32)
    return imported_skill(stored, delivery, management_keys=())
