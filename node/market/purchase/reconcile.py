"""After a restart: finish the settlements a crash left open and bring the sales in line.

A crash between settling on chain and updating the sale row leaves the sale
``authorized`` although the money arrived; the settlement engine's own ledger
knows the outcome, so each reconciled settlement updates its sale.
"""

from __future__ import annotations

import logging

import trio

from node.chain import SettlementEngine
from node.db import Database
from node.market.ledger import MarketLedger
from node.market.states import SaleState

log = logging.getLogger(__name__)


async def reconcile_settlements(engine: SettlementEngine, db: Database, ledger: MarketLedger) -> None:
    """Finish settlements a crash left open; retried (backing off) until the chain answers."""
    delay = 1.0
    while True:
        try:
            rows = await engine.reconcile_async()
            if rows:
                log.info("reconciled settlements count=%d", len(rows))
            # The sale rows follow the chain: a crash between settling and updating a
            # sale left it 'authorized' although the money arrived.
            for row in rows:
                nonce = "0x" + row.authorization.nonce.hex()
                state = SaleState.SETTLED if row.settled else (
                    SaleState.FAILED if row.state == "failed" else None)  # the chain ledger's row state
                if state is not None:
                    await db.run(ledger.sale_followed_settlement,
                                 row.authorization.from_address, nonce, state, row.tx_hash)
            return
        except Exception as error:
            log.warning("settlement reconcile failed, retrying error=%s", error)
            await trio.sleep(delay)
            delay = min(delay * 2, 60.0)
