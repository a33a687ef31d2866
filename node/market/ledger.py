"""Purchase and sale records, and the economics computed from them.

Both live in the node's database (tables of ``node.market.schema``). Sale states (seller side):
``authorized`` (recorded before settling) → ``settled`` → ``delivered``, or
``rejected`` / ``failed``. Purchase states (buyer side): ``quoted`` →
``authorized`` (recorded before the authorization leaves the node) →
``paid`` → ``completed``, or ``refused`` / ``failed`` / ``tampered`` /
``paid_undelivered`` (money moved, skill not yet received: redeliver).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from node.crystals import now_ms
from node.db import Database
from node.market import schema
from node.market.states import PURCHASE_PAID_STATES, SALE_SETTLED_STATES, PurchaseState, SaleState

DAY_MS = 86_400_000
# Purchases whose money is committed: an authorization that left the node can still settle.
COMMITTED_STATES = (PurchaseState.AUTHORIZED, PurchaseState.PENDING, *PURCHASE_PAID_STATES)


@dataclass(frozen=True)
class Sale:
    request_id: str
    listing_id: str
    crystal_id: str
    stable_skill_id: str
    buyer_key: str
    buyer_address: str
    price_micro_usdc: int
    auth_nonce: str | None
    state: str
    tx_hash: str | None
    reason: str | None
    created_at_ms: int
    updated_at_ms: int
    # ``exact`` (an EIP-3009 transfer, ``auth_nonce``/``tx_hash``) or ``batch-settlement``
    # (a voucher: the channel and its total after this sale).
    scheme: str = "exact"
    channel_id: str | None = None
    voucher_total: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Purchase:
    request_id: str
    listing_id: str
    seller_key: str
    name: str
    price_micro_usdc: int
    pay_to: str
    auth_nonce: str | None
    state: str
    tx_hash: str | None
    crystal_id: str | None
    reason: str | None
    created_at_ms: int
    updated_at_ms: int
    # The signed authorization (wire JSON) and when it stops being settleable.
    authorization_json: str | None = None
    valid_before_s: int | None = None
    # A paid delivery the ingestion gate kept out of memory.
    payload: str | None = None
    # Which scheme paid; for a voucher, the channel, its total and the signature sent.
    scheme: str = "exact"
    channel_id: str | None = None
    voucher_total: int | None = None
    voucher_signature: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        del data["authorization_json"]
        del data["voucher_signature"]
        data["has_payload"] = data.pop("payload") is not None
        return data


def _sale(row: sqlite3.Row) -> Sale:
    return Sale(**{key: row[key] for key in row.keys()})  # noqa: SIM118 - sqlite3.Row


def _purchase(row: sqlite3.Row) -> Purchase:
    return Purchase(**{key: row[key] for key in row.keys()})  # noqa: SIM118 - sqlite3.Row


class MarketLedger:
    """Synchronous: call through ``Database.run``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate(schema.CONCEPT, schema.MIGRATIONS)

    # --- sales (seller side) --------------------------------------------------------------
    def record_sale(self, sale: Sale) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO sales(request_id, listing_id, crystal_id, stable_skill_id, buyer_key, "
                "buyer_address, price_micro_usdc, auth_nonce, state, tx_hash, reason, "
                "created_at_ms, updated_at_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(request_id) DO UPDATE SET auth_nonce=excluded.auth_nonce, "
                "state=excluded.state, updated_at_ms=excluded.updated_at_ms",
                (
                    sale.request_id, sale.listing_id, sale.crystal_id, sale.stable_skill_id,
                    sale.buyer_key, sale.buyer_address, sale.price_micro_usdc, sale.auth_nonce,
                    sale.state, sale.tx_hash, sale.reason, sale.created_at_ms, sale.updated_at_ms,
                ),
            )

    def update_sale(self, request_id: str, state: SaleState, tx_hash: str | None = None,
                    reason: str | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE sales SET state=?, tx_hash=COALESCE(?, tx_hash), reason=?, updated_at_ms=? "
                "WHERE request_id=?",
                (state, tx_hash, reason, now_ms(), request_id),
            )

    def sale_followed_settlement(self, buyer_address: str, auth_nonce: str, state: SaleState,
                                 tx_hash: str | None) -> None:
        """Bring an 'authorized' sale in line with its settlement's outcome on chain."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE sales SET state=?, tx_hash=COALESCE(?, tx_hash), updated_at_ms=? "
                "WHERE lower(buyer_address)=lower(?) AND auth_nonce=? AND state=?",
                (state, tx_hash, now_ms(), buyer_address, auth_nonce, SaleState.AUTHORIZED),
            )

    def get_sale(self, request_id: str) -> Sale | None:
        row = self.db.execute("SELECT * FROM sales WHERE request_id=?", (request_id,)).fetchone()
        return None if row is None else _sale(row)

    def sale_for_redelivery(self, listing_id: str, buyer_key: str, tx_hash: str) -> Sale | None:
        row = self.db.execute(
            "SELECT * FROM sales WHERE listing_id=? AND buyer_key=? AND "
            "(tx_hash=? OR state IN (?, ?)) "
            "ORDER BY (tx_hash=?) DESC, created_at_ms DESC LIMIT 1",
            (listing_id, buyer_key, tx_hash, SaleState.AUTHORIZED, SaleState.SETTLED, tx_hash),
        ).fetchone()
        return None if row is None else _sale(row)

    def sales(self, limit: int = 100) -> list[Sale]:
        rows = self.db.execute(
            "SELECT * FROM sales ORDER BY created_at_ms DESC LIMIT ?", (limit,)
        ).fetchall()
        return [_sale(row) for row in rows]

    def unique_buyers(self, stable_skill_id: str) -> int:
        marks = ",".join("?" * len(SALE_SETTLED_STATES))
        row = self.db.execute(
            f"SELECT COUNT(DISTINCT buyer_key) FROM sales WHERE stable_skill_id=? AND state IN ({marks})",
            (stable_skill_id, *SALE_SETTLED_STATES),
        ).fetchone()
        return int(row[0])

    # --- purchases (buyer side) -----------------------------------------------------------
    def record_purchase(self, purchase: Purchase) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO purchases(request_id, listing_id, seller_key, name, price_micro_usdc, "
                "pay_to, auth_nonce, state, tx_hash, crystal_id, reason, created_at_ms, "
                "updated_at_ms, authorization_json, valid_before_s, payload) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    purchase.request_id, purchase.listing_id, purchase.seller_key, purchase.name,
                    purchase.price_micro_usdc, purchase.pay_to, purchase.auth_nonce, purchase.state,
                    purchase.tx_hash, purchase.crystal_id, purchase.reason, purchase.created_at_ms,
                    purchase.updated_at_ms, purchase.authorization_json, purchase.valid_before_s,
                    purchase.payload,
                ),
            )

    def update_purchase(self, request_id: str, state: PurchaseState, *, tx_hash: str | None = None,
                        crystal_id: str | None = None, reason: str | None = None,
                        auth_nonce: str | None = None, payload: str | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE purchases SET state=?, tx_hash=COALESCE(?, tx_hash), "
                "crystal_id=COALESCE(?, crystal_id), auth_nonce=COALESCE(?, auth_nonce), reason=?, "
                "payload=COALESCE(?, payload), updated_at_ms=? WHERE request_id=?",
                (state, tx_hash, crystal_id, auth_nonce, reason, payload, now_ms(), request_id),
            )

    def reauthorize_purchase(self, request_id: str, price_micro_usdc: int, pay_to: str,
                             authorization_json: str, valid_before_s: int) -> None:
        """The seller's terms changed before anything settled: the purchase now stands on a
        new authorization *with the same nonce* (so at most one of the two can ever settle)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE purchases SET price_micro_usdc=?, pay_to=?, authorization_json=?, "
                "valid_before_s=?, state=?, updated_at_ms=? WHERE request_id=?",
                (price_micro_usdc, pay_to, authorization_json, valid_before_s, PurchaseState.AUTHORIZED,
                 now_ms(), request_id),
            )

    def get_purchase(self, request_id: str) -> Purchase | None:
        row = self.db.execute(
            "SELECT * FROM purchases WHERE request_id=?", (request_id,)
        ).fetchone()
        return None if row is None else _purchase(row)

    def latest_purchase(self, listing_id: str) -> Purchase | None:
        row = self.db.execute(
            "SELECT * FROM purchases WHERE listing_id=? ORDER BY created_at_ms DESC LIMIT 1",
            (listing_id,),
        ).fetchone()
        return None if row is None else _purchase(row)

    def purchases(self, limit: int = 100) -> list[Purchase]:
        rows = self.db.execute(
            "SELECT * FROM purchases ORDER BY created_at_ms DESC LIMIT ?", (limit,)
        ).fetchall()
        return [_purchase(row) for row in rows]

    def held_purchases(self, listing_ids: list[str], crystal_ids: list[str]) -> list[Purchase]:
        """Purchases whose skill this node holds (in memory or kept aside), by listing or crystal."""
        if not listing_ids and not crystal_ids:
            return []
        held = (PurchaseState.COMPLETED, PurchaseState.DELIVERED_NOT_INGESTED)
        rows = self.db.execute(
            f"SELECT * FROM purchases WHERE state IN (?, ?) AND (listing_id IN "
            f"({','.join('?' * len(listing_ids)) or 'NULL'}) OR crystal_id IN "
            f"({','.join('?' * len(crystal_ids)) or 'NULL'}))",
            (*held, *listing_ids, *crystal_ids),
        ).fetchall()
        return [_purchase(row) for row in rows]

    def purchase_counts(self) -> dict[str, int]:
        """Purchases per state."""
        return {str(state): int(count) for state, count in self.db.execute(
            "SELECT state, COUNT(*) FROM purchases GROUP BY state").fetchall()}

    def spent_since(self, since_ms: int) -> int:
        """Money committed by this node since ``since_ms``: authorized and paid purchases.

        Authorized-but-unconfirmed and pending purchases (an authorization that left
        the node and can still settle) count, so neither a burst of concurrent buys
        nor a crash mid-purchase can overshoot the daily cap.
        """
        row = self.db.execute(
            "SELECT COALESCE(SUM(price_micro_usdc), 0) FROM purchases WHERE created_at_ms >= ? "
            f"AND state IN ({','.join('?' * len(COMMITTED_STATES))})",
            (since_ms, *COMMITTED_STATES),
        ).fetchone()
        return int(row[0])

    # --- economics ------------------------------------------------------------------------
    def stats(self, now: int | None = None, days: int = 7) -> dict[str, Any]:
        at = now or now_ms()
        conn = self.db
        sale_marks = ",".join("?" * len(SALE_SETTLED_STATES))
        buy_marks = ",".join("?" * len(PURCHASE_PAID_STATES))
        earned = int(conn.execute(
            f"SELECT COALESCE(SUM(price_micro_usdc),0) FROM sales WHERE state IN ({sale_marks})",
            SALE_SETTLED_STATES).fetchone()[0])
        spent = int(conn.execute(
            f"SELECT COALESCE(SUM(price_micro_usdc),0) FROM purchases WHERE state IN ({buy_marks})",
            PURCHASE_PAID_STATES).fetchone()[0])
        top = conn.execute(
            f"SELECT s.stable_skill_id, MAX(l.name) AS name, COUNT(*) AS sales, "
            f"COUNT(DISTINCT s.buyer_key) AS unique_buyers, SUM(s.price_micro_usdc) AS earned "
            f"FROM sales s LEFT JOIN listings l ON l.listing_id = s.listing_id "
            f"WHERE s.state IN ({sale_marks}) GROUP BY s.stable_skill_id "
            f"ORDER BY earned DESC LIMIT 10",
            SALE_SETTLED_STATES,
        ).fetchall()
        start_day = datetime.fromtimestamp(at / 1000, UTC).date() - timedelta(days=days - 1)
        start_ms = int(datetime(start_day.year, start_day.month, start_day.day, tzinfo=UTC).timestamp() * 1000)
        trend = {
            (start_day + timedelta(days=offset)).isoformat(): {"earned_micro_usdc": 0, "spent_micro_usdc": 0}
            for offset in range(days)
        }
        for table, states, key in (
            ("sales", SALE_SETTLED_STATES, "earned_micro_usdc"),
            ("purchases", PURCHASE_PAID_STATES, "spent_micro_usdc"),
        ):
            marks = ",".join("?" * len(states))
            for day, total in conn.execute(
                f"SELECT (created_at_ms - ?) / {DAY_MS} AS day, SUM(price_micro_usdc) FROM {table} "
                f"WHERE created_at_ms >= ? AND state IN ({marks}) GROUP BY day",
                (start_ms, start_ms, *states),
            ).fetchall():
                label = (start_day + timedelta(days=int(day))).isoformat()
                if label in trend:
                    trend[label][key] = int(total)
        counts = {
            "sales": dict(conn.execute("SELECT state, COUNT(*) FROM sales GROUP BY state").fetchall()),
            "purchases": dict(conn.execute("SELECT state, COUNT(*) FROM purchases GROUP BY state").fetchall()),
        }
        return {
            "earned_micro_usdc": earned,
            "spent_micro_usdc": spent,
            "net_micro_usdc": earned - spent,
            "top_skills": [dict(row) for row in top],
            "trend_7d": [{"day": day} | values for day, values in trend.items()],
            "counts": counts,
        }
