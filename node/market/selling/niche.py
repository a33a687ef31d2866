"""The Niche of working memory (seed 001): this node's economics as the dream reads them.

Seed: "The Niche section receives economic data from the MarketplaceEconomics
system: total earnings and spending in USDC, listed skill count and unique
buyer count, top earning skills and 7-day earnings trend."
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from node.db import Database
from node.market.book import ListingBook
from node.market.ledger import SALE_SETTLED_STATES, MarketLedger
from node.memory import NicheData

log = logging.getLogger(__name__)


def niche_data(db: Database) -> NicheData:
    """Earnings, spending, own live listings and distinct buyers from the market tables."""
    stats = MarketLedger(db).stats()
    marks = ",".join("?" * len(SALE_SETTLED_STATES))
    row = db.one(f"SELECT COUNT(DISTINCT buyer_key) FROM sales WHERE state IN ({marks})",
                 SALE_SETTLED_STATES)
    return NicheData.from_market(stats, len(ListingBook(db).own()), int(row[0]) if row else 0)


def niche_source(memory: Any) -> Callable[[], NicheData | None]:
    """A callable for ``WorkingMemory(niche=...)``; None (and a log line) if the ledger fails."""

    def read() -> NicheData | None:
        try:
            return niche_data(memory.db)
        except Exception:
            log.exception("working memory: market economics unavailable for The Niche")
            return None

    return read
