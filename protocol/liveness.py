"""A living market: withdrawals, bounties and the listings sync protocol.

- :class:`ListingWithdrawal` (skills topic): the seller takes a skill off the
  market. Bound to the seller like a listing id, so nobody else can withdraw it.
- :class:`Bounty` (bounties topic): "need: a skill that ..." with a reward in
  integer micro-USDC; re-announced with ``fulfilled_by`` set once bought.
- :class:`ListingBatch` (skills topic): a seller's catalogue in few signed
  messages: up to 128 of its own listing (or withdrawal) envelopes and 60 000
  bytes in each (:data:`MAX_BATCH_BYTES`), every entry signed
  on its own, so receivers store and re-serve them exactly as if each had been
  gossiped alone. One message against the origin's rate limit; its entries
  count against the origin's catalogue budget (``node.net.rules.validation``).
- :class:`ListingsSyncRequest` / :class:`ListingsSyncPage`
  (``/crystalmesh/listings-sync/1``): a node asks a peer for the market
  state it lacks, page by page after a since-cursor; every entry is a complete
  signed envelope the receiver validates exactly as if it had been gossiped.
- :class:`ListingsSyncRequestV2` (``/crystalmesh/listings-sync/2``): the same
  exchange; its pages may also carry skill warnings and endorsement revocations
  (kept :data:`NOTICE_SYNC_LIFETIME_MS`), and it names the listing shards the
  asking node follows (``shard_count`` 0: every shard).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from protocol.schema import (
    MAX_LISTING_LIFETIME_MS,
    MAX_PRICE_MICRO_USDC,
    REQUEST_ID,
    SHA256_HEX,
    TIMESTAMP,
    U63_MAX,
    Blob,
    Bool,
    Int,
    InvalidMessage,
    ListOf,
    Message,
    Nullable,
    Schema,
    Text,
    sha256_hex,
)

__all__ = [
    "LIVENESS_MESSAGES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ITEMS",
    "MAX_BOUNTY_LIFETIME_MS",
    "MAX_BOUNTY_TEXT_CHARS",
    "MAX_SYNC_ENTRY_BYTES",
    "MAX_SYNC_PAGE_BYTES",
    "MAX_SYNC_PAGE_ITEMS",
    "MAX_SYNC_SHARDS",
    "NOTICE_SYNC_LIFETIME_MS",
    "TRUST_REPORT_SYNC_MAX_AGE_MS",
    "WITHDRAWAL_LIFETIME_MS",
    "Bounty",
    "ListingBatch",
    "ListingWithdrawal",
    "ListingsSyncPage",
    "ListingsSyncRequest",
    "ListingsSyncRequestV2",
    "TrustReportsRequest",
]

MAX_SYNC_PAGE_ITEMS = 128
"""At most this many envelopes in one sync page (and the most a request may ask for)."""
MAX_SYNC_ENTRY_BYTES = 32 * 1024
"""One envelope in a sync page: a listing at its field bounds stays well below this."""
MAX_SYNC_PAGE_BYTES = 200_000
"""Sum of the entries of one page, so the page envelope stays under MAX_MESSAGE_BYTES."""
MAX_SYNC_SHARDS = 256
"""At most this many shard ids in one ``ListingsSyncRequestV2`` (a node follows a few)."""
NOTICE_SYNC_LIFETIME_MS = 30 * 86_400_000
"""How long a skill warning or an endorsement revocation is re-served by listings sync after
its issue (a listing lives at most ``MAX_LISTING_LIFETIME_MS``; a node away for longer than
this syncs from scratch and never sees the warned listing's old announcements as live)."""
TRUST_REPORT_SYNC_MAX_AGE_MS = 21 * 86_400_000
"""A synced trust report older than this is ``expired``: three of the longest report intervals
(a week, in a network so large that reports are rare). Receivers keep a report for their own
``max(trust.report_max_age_s, 3 × R)``, usually far less; this is only the protocol's bound."""
MAX_BATCH_ITEMS = 128
"""At most this many listings in one ``listing_batch``."""
MAX_BATCH_BYTES = 60_000
"""Sum of the entries of one batch. A gossip RPC must fit one yamux frame (64 KiB): py-libp2p
0.8.1 writes a larger one frame by frame without holding the stream, so two writers on one
pubsub stream interleave their frames and the receiver drops the stream as malformed."""
MAX_BOUNTY_TEXT_CHARS = 1024
MAX_BOUNTY_LIFETIME_MS = MAX_LISTING_LIFETIME_MS
WITHDRAWAL_LIFETIME_MS = MAX_LISTING_LIFETIME_MS
"""A withdrawal is kept (and synced) this long after its issue: by then every
announcement issued before it has expired on its own."""

_SKILL_ID = Text(128)
_SKILL_VERSION = Int(1, 2**32 - 1)


def _listing_id(seller: bytes, stable_skill_id: str, skill_version: int) -> str:
    # Same derivation as protocol.messages.listing_id_for (kept here to avoid an import cycle).
    from protocol.codec import encode

    return sha256_hex(
        b"crystalmesh/listing-id/v1\x00" + encode([seller, stable_skill_id, skill_version])
    )


@dataclass(frozen=True)
class ListingWithdrawal(Message):
    """The seller withdraws its skill ``stable_skill_id`` at versions <= ``skill_version``.

    Receivers drop the listing and keep the withdrawal as the newest state of
    (seller, stable_skill_id), so an older announcement (late gossip, a peer's
    sync page) cannot bring it back; a later announcement (higher seq) does.
    """

    KIND: ClassVar[str] = "listing_withdrawal"
    FIELDS: ClassVar[Schema] = {
        "listing_id": SHA256_HEX,
        "stable_skill_id": _SKILL_ID,
        "skill_version": _SKILL_VERSION,
    }
    listing_id: str
    stable_skill_id: str
    skill_version: int

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.listing_id != _listing_id(sender, self.stable_skill_id, self.skill_version):
            raise InvalidMessage("listing_id is not derived from sender, stable_skill_id, version")


@dataclass(frozen=True)
class Bounty(Message):
    """A standing request for a skill, matched against listings by meaning.

    ``bounty_id`` is chosen by the poster (16 random bytes, hex); receivers key
    bounties by (sender, bounty_id) and keep the highest seq. ``fulfilled_by``
    is null while open, else the listing the poster bought to fulfil it.
    """

    KIND: ClassVar[str] = "bounty"
    FIELDS: ClassVar[Schema] = {
        "bounty_id": REQUEST_ID,
        "text": Text(MAX_BOUNTY_TEXT_CHARS),
        "reward_micro_usdc": Int(0, MAX_PRICE_MICRO_USDC),
        "expires_at_ms": TIMESTAMP,
        "fulfilled_by": Nullable(SHA256_HEX),
    }
    bounty_id: str
    text: str
    reward_micro_usdc: int
    expires_at_ms: int
    fulfilled_by: str | None = None

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.expires_at_ms <= issued_at_ms:
            raise InvalidMessage("bounty expires before it was issued")
        if self.expires_at_ms - issued_at_ms > MAX_BOUNTY_LIFETIME_MS:
            raise InvalidMessage("bounty lives longer than MAX_BOUNTY_LIFETIME_MS past its issue")


@dataclass(frozen=True)
class ListingsSyncRequest(Message):
    """Ask a peer for its market state changed after ``cursor`` (0: everything)."""

    KIND: ClassVar[str] = "listings_sync_request"
    FIELDS: ClassVar[Schema] = {
        "cursor": Int(0, U63_MAX),
        "limit": Int(1, MAX_SYNC_PAGE_ITEMS),
    }
    cursor: int
    limit: int


@dataclass(frozen=True)
class ListingsSyncRequestV2(Message):
    """Version 2 of the request, only on ``listings-sync/2``: the page may carry notices
    (skill warnings, endorsement revocations), and only listings of the ``shards`` of
    ``shard_count`` are asked for (``shard_count`` 0 and no shards: every listing).
    Withdrawals, bounties and notices are not filtered."""

    KIND: ClassVar[str] = "listings_sync_request"
    VERSION: ClassVar[int] = 2
    FIELDS: ClassVar[Schema] = {
        "cursor": Int(0, U63_MAX),
        "limit": Int(1, MAX_SYNC_PAGE_ITEMS),
        "shard_count": Int(0, 4096),
        "shards": ListOf(Int(0, 4095), MAX_SYNC_SHARDS),
    }
    cursor: int
    limit: int
    shard_count: int = 0
    shards: tuple[int, ...] = ()

    def check(self) -> None:
        count = self.shard_count
        if count == 0:
            if self.shards:
                raise InvalidMessage("shards: listed without a shard_count")
            return
        if count & (count - 1):
            raise InvalidMessage(f"shard_count: {count} is not a power of two")
        if any(shard >= count for shard in self.shards):
            raise InvalidMessage(f"shards: every shard is below shard_count {count}")
        if list(self.shards) != sorted(set(self.shards)):
            raise InvalidMessage("shards: ascending, each once")


@dataclass(frozen=True)
class TrustReportsRequest(Message):
    """Ask a peer (``listings-sync/2`` only) for the latest signed trust report of every sender
    it holds, ``cursor`` 0 first, then the page's ``next_cursor``: what a node that joins needs
    for the EigenTrust levels before the next round of reports. Answered by a
    ``listings_sync_page`` of ``trust_report`` envelopes."""

    KIND: ClassVar[str] = "trust_reports_request"
    FIELDS: ClassVar[Schema] = {
        "cursor": Int(0, U63_MAX),
        "limit": Int(1, MAX_SYNC_PAGE_ITEMS),
    }
    cursor: int
    limit: int


@dataclass(frozen=True)
class ListingsSyncPage(Message):
    """Up to ``limit`` signed envelopes (listings, withdrawals, bounties) after the cursor.

    ``next_cursor`` is the cursor to ask with next; ``more`` says whether there is more.
    """

    KIND: ClassVar[str] = "listings_sync_page"
    FIELDS: ClassVar[Schema] = {
        "entries": ListOf(Blob(MAX_SYNC_ENTRY_BYTES), MAX_SYNC_PAGE_ITEMS),
        "next_cursor": Int(0, U63_MAX),
        "more": Bool(),
    }
    entries: tuple[bytes, ...]
    next_cursor: int
    more: bool

    def check(self) -> None:
        total = sum(len(entry) for entry in self.entries)
        if total > MAX_SYNC_PAGE_BYTES:
            raise InvalidMessage(f"entries: {total} bytes > {MAX_SYNC_PAGE_BYTES}")


@dataclass(frozen=True)
class ListingBatch(Message):
    """Many announcements of one seller in one gossip message: each entry a complete signed
    ``skill_listing`` or ``listing_withdrawal`` envelope *by the batch's own sender*."""

    KIND: ClassVar[str] = "listing_batch"
    FIELDS: ClassVar[Schema] = {
        "entries": ListOf(Blob(MAX_SYNC_ENTRY_BYTES), MAX_BATCH_ITEMS),
    }
    entries: tuple[bytes, ...]

    def check(self) -> None:
        if not self.entries:
            raise InvalidMessage("entries: a batch carries at least one listing")
        total = sum(len(entry) for entry in self.entries)
        if total > MAX_BATCH_BYTES:
            raise InvalidMessage(f"entries: {total} bytes > {MAX_BATCH_BYTES}")


LIVENESS_MESSAGES: tuple[type[Message], ...] = (
    ListingBatch,
    ListingWithdrawal,
    Bounty,
    ListingsSyncRequest,
    ListingsSyncRequestV2,
    TrustReportsRequest,
    ListingsSyncPage,
)
