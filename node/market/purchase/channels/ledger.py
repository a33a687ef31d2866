"""The durable record of payment channels, on both sides (tables of migration 7 of
``node.market.schema``).

Rules, each kept by one transaction:

- The buyer records the purchase *and* raises the channel's ``signed_total`` before the
  voucher leaves the node: its exposure (what a seller could claim) is never more than it
  knows. ``charged_total`` (what the seller acknowledged) is the next voucher's base.
- The seller records the sale *and* moves the channel's ``charged_total`` from the base the
  voucher was checked against to the voucher's total, compare-and-set: of two vouchers racing
  on one channel only one is recorded, and a voucher is never delivered on before it is.
- A claim is journaled (``submitted``: its channels and totals) before it is sent, so
  after a crash the chain is asked about exactly the claims that may have happened.

Synchronous: call through ``Database.run``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from node.crystals import now_ms
from node.db import Database
from node.market.ledger import Purchase, Sale
from node.market.purchase.channels.terms import terms_from_json, terms_json
from node.market.states import ChannelStatus, ClaimState, SaleState
from protocol.channel import ChannelTerms


@dataclass(frozen=True)
class BuyerChannel:
    channel_id: str
    seller_key: str
    receiver: str
    token: str
    terms_json: str
    deposited_micro_usdc: int
    pending_deposit_json: str | None
    charged_total: int
    signed_total: int
    state: str
    refund_tx: str | None
    refunded_micro_usdc: int
    created_at_ms: int
    updated_at_ms: int
    withdraw_requested_at_s: int = 0
    withdraw_micro_usdc: int = 0

    @property
    def terms(self) -> ChannelTerms:
        return terms_from_json(json.loads(self.terms_json))

    @property
    def withdraw_finalize_after_s(self) -> int | None:
        """When (unix seconds, the chain's clock) a pending withdrawal can be finalized."""
        if not self.withdraw_requested_at_s:
            return None
        return self.withdraw_requested_at_s + self.terms.withdraw_delay_s

    @property
    def remaining_micro_usdc(self) -> int:
        """What further vouchers may still spend of the confirmed deposit."""
        return max(0, self.deposited_micro_usdc - self.charged_total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id, "seller_key": self.seller_key,
            "receiver": self.receiver, "token": self.token,
            "deposit_micro_usdc": self.deposited_micro_usdc,
            "spent_micro_usdc": self.charged_total,
            "signed_micro_usdc": self.signed_total,
            "remaining_micro_usdc": self.remaining_micro_usdc,
            "deposit_pending": self.pending_deposit_json is not None,
            "state": self.state, "refund_tx": self.refund_tx,
            "refunded_micro_usdc": self.refunded_micro_usdc,
            "withdraw_delay_s": self.terms.withdraw_delay_s,
            "withdraw_requested_at_s": self.withdraw_requested_at_s,
            "withdraw_micro_usdc": self.withdraw_micro_usdc,
            "withdraw_finalize_after_s": self.withdraw_finalize_after_s,
            "updated_at_ms": self.updated_at_ms,
        }


@dataclass(frozen=True)
class SellerChannel:
    channel_id: str
    payer: str
    buyer_key: str
    terms_json: str
    charged_total: int
    voucher_signature: str | None
    claimed_total: int
    balance: int
    withdraw_requested_at_s: int
    synced_at_ms: int
    first_unclaimed_at_ms: int | None
    state: str
    updated_at_ms: int

    @property
    def terms(self) -> ChannelTerms:
        return terms_from_json(json.loads(self.terms_json))

    @property
    def unclaimed_micro_usdc(self) -> int:
        return max(0, self.charged_total - self.claimed_total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id, "payer": self.payer, "buyer_key": self.buyer_key,
            "deposit_micro_usdc": self.balance, "charged_micro_usdc": self.charged_total,
            "claimed_micro_usdc": self.claimed_total,
            "unclaimed_micro_usdc": self.unclaimed_micro_usdc,
            "withdraw_requested_at_s": self.withdraw_requested_at_s,
            "withdraw_delay_s": self.terms.withdraw_delay_s,
            "state": self.state, "synced_at_ms": self.synced_at_ms,
        }


@dataclass(frozen=True)
class Claim:
    claim_id: str
    tx_hash: str | None
    claims_json: str
    total_micro_usdc: int
    state: str
    gas_used: int | None
    reason: str | None
    created_at_ms: int
    updated_at_ms: int

    @property
    def totals(self) -> dict[str, int]:
        """channel id -> the total this claim claims up to."""
        return {key: int(value) for key, value in json.loads(self.claims_json).items()}


def _row(cls: type, row: sqlite3.Row | None) -> Any:
    return None if row is None else cls(**{key: row[key] for key in row.keys()})  # noqa: SIM118


class ChannelLedger:
    """Both sides' channel records and the claim journal, in the node's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # --- buyer --------------------------------------------------------------------------
    def buyer_channel(self, receiver: str, token: str) -> BuyerChannel | None:
        """The channel this node pays ``receiver`` through (not closed), if any."""
        return _row(BuyerChannel, self.db.execute(
            "SELECT * FROM buyer_channels WHERE lower(receiver)=lower(?) AND lower(token)=lower(?) "
            "AND state != ? ORDER BY created_at_ms DESC LIMIT 1",
            (receiver, token, ChannelStatus.CLOSED)).fetchone())

    def buyer_channel_by_id(self, channel_id: str) -> BuyerChannel | None:
        return _row(BuyerChannel, self.db.execute(
            "SELECT * FROM buyer_channels WHERE channel_id=?", (channel_id,)).fetchone())

    def buyer_channels(self) -> list[BuyerChannel]:
        return [_row(BuyerChannel, row) for row in self.db.execute(
            "SELECT * FROM buyer_channels ORDER BY created_at_ms DESC").fetchall()]

    def open_buyer_channel(self, channel_id: str, seller_key: str, terms: ChannelTerms) -> None:
        """Create the record of a channel before its first deposit is signed (idempotent)."""
        at = now_ms()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO buyer_channels(channel_id, seller_key, receiver, token, terms_json, "
                "deposited_micro_usdc, pending_deposit_json, charged_total, signed_total, state, "
                "refund_tx, created_at_ms, updated_at_ms) VALUES (?,?,?,?,?,0,NULL,0,0,?,NULL,?,?) "
                "ON CONFLICT(channel_id) DO UPDATE SET state=?, updated_at_ms=? "
                "WHERE buyer_channels.state=?",
                (channel_id, seller_key, terms.receiver, terms.token, json.dumps(terms_json(terms)),
                 ChannelStatus.OPEN, at, at, ChannelStatus.OPEN, at, ChannelStatus.CLOSED))

    def record_voucher_purchase(self, purchase: Purchase, pending_deposit_json: str | None) -> None:
        """The purchase and the voucher it carries, before the voucher leaves the node."""
        assert purchase.channel_id is not None and purchase.voucher_total is not None
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO purchases(request_id, listing_id, seller_key, name, price_micro_usdc, "
                "pay_to, auth_nonce, state, tx_hash, crystal_id, reason, created_at_ms, "
                "updated_at_ms, authorization_json, valid_before_s, payload, scheme, channel_id, "
                "voucher_total, voucher_signature) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (purchase.request_id, purchase.listing_id, purchase.seller_key, purchase.name,
                 purchase.price_micro_usdc, purchase.pay_to, None, purchase.state, None, None,
                 purchase.reason, purchase.created_at_ms, purchase.updated_at_ms, None, None, None,
                 purchase.scheme, purchase.channel_id, purchase.voucher_total,
                 purchase.voucher_signature))
            conn.execute(
                "UPDATE buyer_channels SET signed_total=MAX(signed_total, ?), "
                "pending_deposit_json=COALESCE(?, pending_deposit_json), updated_at_ms=? "
                "WHERE channel_id=?",
                (purchase.voucher_total, pending_deposit_json, now_ms(), purchase.channel_id))

    def resign_voucher_purchase(self, request_id: str, channel_id: str, total: int,
                                signature: str) -> None:
        """The seller's record showed another base: the purchase now carries a new voucher."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE purchases SET voucher_total=?, voucher_signature=?, updated_at_ms=? "
                         "WHERE request_id=?", (total, signature, now_ms(), request_id))
            conn.execute("UPDATE buyer_channels SET signed_total=MAX(signed_total, ?), "
                         "updated_at_ms=? WHERE channel_id=?", (total, now_ms(), channel_id))

    def seller_acknowledged(self, channel_id: str, charged_total: int,
                            deposit_confirmed_micro_usdc: int | None = None) -> None:
        """The seller recorded a voucher for ``charged_total`` (and took a deposit)."""
        with self.db.transaction() as conn:
            if deposit_confirmed_micro_usdc is not None:
                conn.execute(
                    "UPDATE buyer_channels SET deposited_micro_usdc=?, pending_deposit_json=NULL "
                    "WHERE channel_id=?", (deposit_confirmed_micro_usdc, channel_id))
            conn.execute(
                "UPDATE buyer_channels SET charged_total=MAX(charged_total, ?), "
                "signed_total=MAX(signed_total, ?), updated_at_ms=? WHERE channel_id=?",
                (charged_total, charged_total, now_ms(), channel_id))

    def rebase(self, channel_id: str, charged_total: int, deposited_micro_usdc: int | None) -> None:
        """Take the seller's record (its newest voucher, checked to be ours) as the base."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE buyer_channels SET charged_total=?, signed_total=MAX(signed_total, ?), "
                "deposited_micro_usdc=COALESCE(?, deposited_micro_usdc), updated_at_ms=? "
                "WHERE channel_id=?",
                (charged_total, charged_total, deposited_micro_usdc, now_ms(), channel_id))

    def record_pending_deposit(self, channel_id: str, deposit_json: str | None) -> None:
        """A deposit signed (before it leaves the node), so a resend carries the same one."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE buyer_channels SET pending_deposit_json=?, updated_at_ms=? "
                         "WHERE channel_id=?", (deposit_json, now_ms(), channel_id))

    def drop_pending_deposit(self, channel_id: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE buyer_channels SET pending_deposit_json=NULL, updated_at_ms=? "
                         "WHERE channel_id=?", (now_ms(), channel_id))

    def buyer_channel_state(self, channel_id: str, state: ChannelStatus,
                            refund_tx: str | None = None, refunded: int | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE buyer_channels SET state=?, refund_tx=COALESCE(?, refund_tx), "
                "refunded_micro_usdc=COALESCE(?, refunded_micro_usdc), updated_at_ms=? "
                "WHERE channel_id=?", (state, refund_tx, refunded, now_ms(), channel_id))

    def buyer_withdraw(self, channel_id: str, state: ChannelStatus, requested_at_s: int,
                       amount: int, deposited: int | None = None, withdrawn: int = 0) -> None:
        """The timed withdrawal's step: started (``withdrawing``, when, how much) or finalized
        (``closed``, the deposit left on chain, what came back counted as refunded)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE buyer_channels SET state=?, withdraw_requested_at_s=?, "
                "withdraw_micro_usdc=?, deposited_micro_usdc=COALESCE(?, deposited_micro_usdc), "
                "refunded_micro_usdc=refunded_micro_usdc+?, updated_at_ms=? WHERE channel_id=?",
                (state, requested_at_s, amount, deposited, withdrawn, now_ms(), channel_id))

    # --- seller -------------------------------------------------------------------------
    def seller_channel(self, channel_id: str) -> SellerChannel | None:
        return _row(SellerChannel, self.db.execute(
            "SELECT * FROM seller_channels WHERE channel_id=?", (channel_id,)).fetchone())

    def seller_channels(self) -> list[SellerChannel]:
        return [_row(SellerChannel, row) for row in self.db.execute(
            "SELECT * FROM seller_channels ORDER BY updated_at_ms DESC").fetchall()]

    def synced(self, channel_id: str, terms: ChannelTerms, buyer_key: str, balance: int,
               claimed_total: int, withdraw_requested_at_s: int) -> SellerChannel:
        """The channel as the chain shows it now. A new channel starts charged at what the
        chain says was claimed (nothing below it can be claimed again)."""
        at = now_ms()
        status = ChannelStatus.WITHDRAWING if withdraw_requested_at_s else ChannelStatus.OPEN
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO seller_channels(channel_id, payer, buyer_key, terms_json, "
                "charged_total, voucher_signature, claimed_total, balance, "
                "withdraw_requested_at_s, synced_at_ms, first_unclaimed_at_ms, state, "
                "updated_at_ms) VALUES (?,?,?,?,?,NULL,?,?,?,?,NULL,?,?) "
                "ON CONFLICT(channel_id) DO UPDATE SET "
                "claimed_total=MAX(seller_channels.claimed_total, excluded.claimed_total), "
                "charged_total=MAX(seller_channels.charged_total, excluded.claimed_total), "
                "balance=excluded.balance, withdraw_requested_at_s=excluded.withdraw_requested_at_s, "
                "synced_at_ms=excluded.synced_at_ms, state=excluded.state, "
                "updated_at_ms=excluded.updated_at_ms",
                (channel_id, terms.payer, buyer_key, json.dumps(terms_json(terms)), claimed_total,
                 claimed_total, balance, withdraw_requested_at_s, at, status, at))
        channel = self.seller_channel(channel_id)
        assert channel is not None
        return channel

    def seller_channel_closed(self, channel_id: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE seller_channels SET state=?, first_unclaimed_at_ms=NULL, "
                         "updated_at_ms=? WHERE channel_id=?",
                         (ChannelStatus.CLOSED, now_ms(), channel_id))

    def record_voucher_sale(self, sale: Sale, base_total: int, signature: str) -> bool:
        """Record the sale and move the channel from ``base_total`` to the voucher's total,
        in one transaction; False (nothing written) if the channel is no longer at the base."""
        assert sale.channel_id is not None and sale.voucher_total is not None
        with self.db.transaction() as conn:
            moved = conn.execute(
                "UPDATE seller_channels SET charged_total=?, voucher_signature=?, "
                "first_unclaimed_at_ms=COALESCE(first_unclaimed_at_ms, ?), buyer_key=?, "
                "updated_at_ms=? WHERE channel_id=? AND charged_total=?",
                (sale.voucher_total, signature, sale.created_at_ms, sale.buyer_key,
                 sale.created_at_ms, sale.channel_id, base_total)).rowcount
            if moved != 1:
                return False
            conn.execute(
                "INSERT INTO sales(request_id, listing_id, crystal_id, stable_skill_id, buyer_key, "
                "buyer_address, price_micro_usdc, auth_nonce, state, tx_hash, reason, "
                "created_at_ms, updated_at_ms, scheme, channel_id, voucher_total) "
                "VALUES (?,?,?,?,?,?,?,NULL,?,NULL,NULL,?,?,?,?,?)",
                (sale.request_id, sale.listing_id, sale.crystal_id, sale.stable_skill_id,
                 sale.buyer_key, sale.buyer_address, sale.price_micro_usdc, SaleState.VOUCHED,
                 sale.created_at_ms, sale.updated_at_ms, sale.scheme, sale.channel_id,
                 sale.voucher_total))
        return True

    def unclaimed(self) -> list[SellerChannel]:
        return [_row(SellerChannel, row) for row in self.db.execute(
            "SELECT * FROM seller_channels WHERE charged_total > claimed_total "
            "ORDER BY first_unclaimed_at_ms").fetchall()]

    def exposure(self) -> int:
        """Unclaimed voucher money, across every channel paying this node."""
        row = self.db.execute("SELECT COALESCE(SUM(charged_total - claimed_total), 0) "
                              "FROM seller_channels WHERE charged_total > claimed_total").fetchone()
        return int(row[0])

    # --- claims (seller) ----------------------------------------------------------------
    def claim_submitted(self, claim_id: str, totals: dict[str, int]) -> None:
        """Journal a claim before it is sent: which channels, up to which totals."""
        at = now_ms()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO channel_claims(claim_id, tx_hash, claims_json, total_micro_usdc, "
                "state, gas_used, reason, created_at_ms, updated_at_ms) "
                "VALUES (?,NULL,?,?,?,NULL,NULL,?,?)",
                (claim_id, json.dumps(totals), 0, ClaimState.SUBMITTED, at, at))

    def claim_finished(self, claim_id: str, state: ClaimState, claimed: dict[str, int],
                       gas_used: int | None, reason: str | None = None,
                       tx_hash: str | None = None) -> None:
        """The claim's outcome, and each channel's claimed total as the chain now shows it."""
        at = now_ms()
        with self.db.transaction() as conn:
            row = conn.execute("SELECT claims_json FROM channel_claims WHERE claim_id=?",
                               (claim_id,)).fetchone()
            before = {key: 0 for key in (json.loads(row[0]) if row is not None else {})}
            total = 0
            for channel_id, claimed_total in claimed.items():
                old = conn.execute("SELECT claimed_total FROM seller_channels WHERE channel_id=?",
                                   (channel_id,)).fetchone()
                previous = int(old[0]) if old is not None else before.get(channel_id, 0)
                total += max(0, claimed_total - previous)
                conn.execute(
                    "UPDATE seller_channels SET claimed_total=MAX(claimed_total, ?), "
                    "first_unclaimed_at_ms=CASE WHEN charged_total > MAX(claimed_total, ?) "
                    "THEN first_unclaimed_at_ms ELSE NULL END, updated_at_ms=? WHERE channel_id=?",
                    (claimed_total, claimed_total, at, channel_id))
            conn.execute(
                "UPDATE channel_claims SET state=?, gas_used=?, reason=?, total_micro_usdc=?, "
                "tx_hash=COALESCE(?, tx_hash), updated_at_ms=? WHERE claim_id=?",
                (state, gas_used, reason, total, tx_hash, at, claim_id))

    def open_claims(self) -> list[Claim]:
        return [_row(Claim, row) for row in self.db.execute(
            "SELECT * FROM channel_claims WHERE state=?", (ClaimState.SUBMITTED,)).fetchall()]

    def claims(self, limit: int = 50) -> list[Claim]:
        return [_row(Claim, row) for row in self.db.execute(
            "SELECT * FROM channel_claims ORDER BY created_at_ms DESC LIMIT ?", (limit,)).fetchall()]

    def claim_totals(self) -> dict[str, int]:
        """Claims mined, money claimed and gas spent (for /metrics and `market claim`)."""
        row = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(total_micro_usdc), 0), COALESCE(SUM(gas_used), 0) "
            "FROM channel_claims WHERE state=?", (ClaimState.MINED,)).fetchone()
        return {"claims": int(row[0]), "claimed_micro_usdc": int(row[1]), "gas_used": int(row[2])}

    def voucher_sale(self, request_id: str) -> Sale | None:
        row = self.db.execute("SELECT * FROM sales WHERE request_id=?", (request_id,)).fetchone()
        return None if row is None else Sale(**{key: row[key] for key in row.keys()})  # noqa: SIM118
