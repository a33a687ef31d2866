"""The market feed (newest state per key, paged by a since-cursor) on a real SQLite database."""

from __future__ import annotations

from pathlib import Path

from node.db import Database
from node.market import schema
from node.market.book.lifecycle import ListingLifecycle
from node.market.book.listings import ListingBook
from protocol.envelope import open_envelope, seal
from protocol.identity import Identity
from protocol.liveness import ListingWithdrawal
from protocol.messages import SkillListing
from tests.support.net import make_listing

NOW = 1_800_000_000_000


def test_pages_follow_the_cursor_carry_only_the_newest_live_state_and_fit_the_budget(
        tmp_path: Path) -> None:
    db = Database(tmp_path / "market.db")
    db.migrate(schema.CONCEPT, schema.MIGRATIONS)
    book = ListingBook(db)
    lifecycle = ListingLifecycle(db, book)
    seller = Identity.generate()
    raws = []
    for i in range(10):
        listing = make_listing(seller, name=f"s{i}", now_ms=NOW)
        raw = seal(seller, SkillListing.KIND, listing, i + 1, NOW)
        raws.append(raw)
        assert lifecycle.apply(open_envelope(raw), raw, None, None, NOW) == "accept"

    first, cursor, more = lifecycle.feed.page(0, 4, 200_000, NOW)
    assert first == raws[:4] and more
    second, cursor2, more = lifecycle.feed.page(cursor, 100, 200_000, NOW)
    assert second == raws[4:] and not more
    # A page never goes over its byte budget: it stops early and says there is more.
    few, _, more = lifecycle.feed.page(0, 100, len(raws[0]) * 3, NOW)
    assert len(few) == 3 and more

    # Withdrawing s0 replaces its state: after the old cursor only the withdrawal comes.
    stored = book.get(open_envelope(raws[0]).message().listing_id)  # type: ignore[union-attr]
    assert stored is not None
    withdrawal = ListingWithdrawal(listing_id=stored.listing.listing_id,
                                   stable_skill_id=stored.listing.stable_skill_id,
                                   skill_version=stored.listing.skill_version)
    raw = seal(seller, ListingWithdrawal.KIND, withdrawal, 100, NOW + 1)
    assert lifecycle.apply(open_envelope(raw), raw, None, None, NOW + 1) == "accept"
    after, _, _ = lifecycle.feed.page(cursor2, 100, 200_000, NOW + 1)
    assert after == [raw]
    everything, _, _ = lifecycle.feed.page(0, 100, 200_000, NOW + 1)
    assert raws[0] not in everything and raw in everything and len(everything) == 10
    # Expired states are not served, and pruning forgets them.
    later = NOW + 86_400_000 + 1
    assert lifecycle.feed.page(0, 100, 200_000, later)[0] == [raw]
    assert lifecycle.prune(later)["feed"] == 9
    db.close()
