"""The listing book: listings and their lifecycle, bounties, the living market.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.book.bounties import BountyBoard as BountyBoard
    from node.market.book.bounties import StoredBounty as StoredBounty
    from node.market.book.bounties import count_matches as count_matches
    from node.market.book.lifecycle import ACCEPT as ACCEPT
    from node.market.book.lifecycle import WITHDRAWN_MARK as WITHDRAWN_MARK
    from node.market.book.lifecycle import ListingLifecycle as ListingLifecycle
    from node.market.book.lifecycle import MarketFeed as MarketFeed
    from node.market.book.listings import ListingBook as ListingBook
    from node.market.book.listings import StoredListing as StoredListing

__getattr__ = face(__name__)
