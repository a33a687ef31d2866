"""Listings sync (``/crystalmesh/<network>/listings-sync/2`` and ``/1``): nodes catch up.

Gossip only reaches nodes online when a message is published. On every new
connection (and again every ``resync_s``) a node asks the peer for the
market state it lacks, one request/response exchange per page:

    ListingsSyncRequest{cursor, limit}  ->  ListingsSyncPage{entries, next_cursor, more}

``cursor`` is the peer's own change counter (``node.market.book.lifecycle``); the
first sync asks from 0, later ones continue from the last ``next_cursor``.
Every entry is a signed envelope (listing, withdrawal, bounty) that goes
through ``MessageValidator.check_synced`` — the gossip rules of its topic —
and then to the very handlers gossip feeds, so the listing book and trust
gate see no difference. Outcomes are gossip's: accept; ignore (stale,
expired, replayed, unknown kind, or rate-limited relays: nobody pays);
reject (forged, malformed, wrong kind, ...: the *serving* peer pays in its
peer score, as a relay that handed us garbage).

Two versions, served side by side. Version 2 (``ListingsSyncRequestV2``) pages
also carry skill warnings and endorsement revocations (``SYNC_NOTICE_KINDS``:
what a node that was away must apply before it buys), and the request names the
listing shards the asking node follows (``SyncScope``). Version 1 pages never
carry notices: an older node rejects them as ``wrong_topic`` and would charge
us. A client asks version 2 first and falls back to version 1 for a peer that
does not speak it (remembered per peer), so older peers keep working both ways.
On version 2 a node also asks each peer once, after its first listings session,
for the latest signed trust report of every sender the peer holds
(``TrustReportsRequest``; the trust layer's ``report_page``): a joiner's
EigenTrust inputs without waiting for the next round of reports.

Containment: each page is bounded by the protocol (``MAX_SYNC_PAGE_ITEMS``,
``MAX_SYNC_PAGE_BYTES``) and by the request's ``limit``; a session stops
after ``max_pages`` pages or ``max_entries`` entries or ``max_rejects``
rejected entries; a peer that does not answer within ``request_timeout_s``
is penalised (``sync_stalled``) and not asked again before ``resync_s``; one
that sends more than it was asked, or a cursor that does not advance, is
penalised (``sync_overrun``). The server side answers at most
``serve_per_minute`` pages per peer (burst ``serve_burst``) and inherits the
request/response limits (streams per peer, read timeout, sender binding).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from libp2p.abc import IHost
from libp2p.peer.id import ID

from node.net.reqresp import (
    Connect,
    ProtocolUnsupported,
    PurchaseTransport,
    ReqRespError,
    RequestTimeout,
)
from node.net.rules import IGNORE_REASONS, RATE_LIMITED, MessageValidator, Rejection, TokenBuckets
from protocol.envelope import Envelope, InvalidEnvelope, seal
from protocol.identity import Identity, peer_id_from_public_key
from protocol.liveness import MAX_SYNC_PAGE_BYTES, MAX_SYNC_PAGE_ITEMS
from protocol.messages import (
    ErrorReply,
    ListingsSyncPage,
    ListingsSyncRequest,
    ListingsSyncRequestV2,
    Message,
    TrustReportsRequest,
)
from protocol.purchase import ERROR_RATE_LIMITED
from protocol.topics import (
    LISTINGS_SYNC_PROTOCOL,
    SYNC_EXCHANGES,
    SYNC_EXCHANGES_V2,
    SYNCABLE_KINDS,
    SYNCABLE_KINDS_V1,
    SYNCED_TRUST_KINDS,
)

logger = logging.getLogger(__name__)

SYNC_STALLED = "sync_stalled"
SYNC_OVERRUN = "sync_overrun"



@dataclass(frozen=True)
class SyncScope:
    """What a request asks for beyond its cursor: notices (version 2 only) and, when
    ``shard_count`` is set, only the listings of ``shards`` of ``shard_count``."""

    notices: bool = False
    shard_count: int = 0
    shards: frozenset[int] = frozenset()


V1_SCOPE = SyncScope()

SyncPager = Callable[[int, int, int], Awaitable[tuple[list[bytes], int, bool]]]
"""``await pager(cursor, limit, max_bytes) -> (envelopes, next_cursor, more)``: trust reports."""
SyncSource = Callable[[int, int, int, SyncScope], Awaitable[tuple[list[bytes], int, bool]]]
"""``await source(cursor, limit, max_bytes, scope) -> (envelopes, next_cursor, more)``."""
EntryHandler = Callable[[str, Envelope], Awaitable[None]]
"""``await handler(topic, envelope)`` for every accepted synced envelope."""


@dataclass(frozen=True)
class SyncLimits:
    page_items: int = MAX_SYNC_PAGE_ITEMS
    max_pages: int = 64
    max_entries: int = 4096
    max_rejects: int = 3
    request_timeout_s: float = 10.0
    resync_s: float = 300.0
    concurrency: int = 4
    serve_per_minute: float = 60.0
    serve_burst: int = 40
    poll_s: float = 0.2
    versions: tuple[int, ...] = (2, 1)
    """Protocol versions served and asked, newest first (a test plays an older node: (1,))."""


@dataclass
class SyncReport:
    """What one session with one peer brought."""

    peer_id: str
    pages: int = 0
    accepted: int = 0
    ignored: int = 0
    rejected: int = 0
    version: int = 0
    trust: bool = False  # a trust-report catch-up session, not listings
    stopped: str = "done"
    ignore_reasons: dict[str, int] = field(default_factory=dict)


class ListingSync:
    """Client and server of the listings sync protocol over one host."""

    def __init__(self, host: IHost, identity: Identity, next_seq: Callable[[], int],
                 validator: MessageValidator, on_entry: EntryHandler,
                 penalize: Callable[[Rejection], None],
                 is_banned: Callable[[ID], bool] = lambda peer: False,
                 limits: SyncLimits | None = None, clock_window_ms: int = 120_000,
                 protocol_id: str = LISTINGS_SYNC_PROTOCOL,
                 connect: Connect | None = None, protocol_id_v2: str | None = None,
                 shards: Callable[[], tuple[int, frozenset[int]] | None] = lambda: None) -> None:
        self.identity = identity
        self.next_seq = next_seq
        self.validator = validator
        self.on_entry = on_entry
        self.penalize = penalize
        self.is_banned = is_banned
        self.limits = limits or SyncLimits()
        # (shard_count, shards followed) for version 2 requests; None: every listing.
        self.shards = shards

        def transport(protocol: str, exchanges: dict[str, frozenset[str]]) -> PurchaseTransport:
            return PurchaseTransport(
                host, identity, next_seq, handler_timeout_s=self.limits.request_timeout_s,
                is_banned=is_banned, protocol_id=protocol, max_streams_per_peer=2,
                clock_window_ms=clock_window_ms, now_ms=validator.now_ms,
                exchanges=exchanges, connect=connect,
            )

        self.transport = transport(protocol_id, SYNC_EXCHANGES)
        v2 = protocol_id_v2 or protocol_id.removesuffix("/1") + "/2"
        self.transport_v2 = transport(v2, SYNC_EXCHANGES_V2)
        # Trust-report catch-up (version 2): served from ``_trust_source``, asked once per peer.
        self._trust_source: SyncPager | None = None
        self.trust_synced: set[str] = set()
        self.peer_versions: dict[str, int] = {}  # peers found not to speak version 2
        self._source: SyncSource | None = None
        self._serve_buckets = TokenBuckets(self.limits.serve_per_minute, self.limits.serve_burst)
        self.cursors: dict[str, int] = {}
        self.full_cursors: dict[str, int] = {}  # of every-shard sessions (network search)
        self._synced_at: dict[str, float] = {}
        self._running: set[str] = set()
        self.reports: list[SyncReport] = []
        self.served_pages = 0

    # ------------------------------------------------------------------ server
    def serve(self, source: SyncSource) -> None:
        self._source = source
        if 1 in self.limits.versions:
            self.transport.serve(self._handle_v1)
        if 2 in self.limits.versions:
            self.transport_v2.serve(self._handle_v2)

    async def _handle_v1(self, peer_id: str, envelope: Envelope) -> bytes:
        return await self._handle(peer_id, envelope, V1_SCOPE)

    def serve_trust_reports(self, source: SyncPager) -> None:
        """Answer ``trust_reports_request`` (version 2) from ``source``; ask peers once each."""
        self._trust_source = source

    async def _handle_v2(self, peer_id: str, envelope: Envelope) -> bytes:
        request = envelope.message()
        if isinstance(request, TrustReportsRequest):
            return await self._handle_trust(peer_id, request)
        scope = SyncScope(notices=True)
        if isinstance(request, ListingsSyncRequestV2) and request.shard_count:
            scope = SyncScope(True, request.shard_count, frozenset(request.shards))
        return await self._handle(peer_id, envelope, scope)

    async def _handle_trust(self, peer_id: str, request: TrustReportsRequest) -> bytes:
        if not self._serve_buckets.allows(peer_id):
            return self.transport.error_reply(ERROR_RATE_LIMITED, "sync pages per minute")
        self._serve_buckets.spend(peer_id)
        entries: list[bytes] = []
        next_cursor, more = request.cursor, False
        if self._trust_source is not None:
            entries, next_cursor, more = await self._trust_source(
                request.cursor, min(request.limit, self.limits.page_items), MAX_SYNC_PAGE_BYTES)
        page = ListingsSyncPage(entries=tuple(entries), next_cursor=next_cursor, more=more)
        self.served_pages += 1
        return seal(self.identity, page.KIND, page, self.next_seq(), self.validator.now_ms())

    async def _handle(self, peer_id: str, envelope: Envelope, scope: SyncScope) -> bytes:
        request = envelope.message()
        # Either version's request on either protocol: the protocol decides what a page holds.
        assert isinstance(request, ListingsSyncRequest | ListingsSyncRequestV2)
        if not self._serve_buckets.allows(peer_id):
            return self.transport.error_reply(ERROR_RATE_LIMITED, "sync pages per minute")
        self._serve_buckets.spend(peer_id)
        assert self._source is not None
        limit = min(request.limit, self.limits.page_items)
        entries, next_cursor, more = await self._source(request.cursor, limit,
                                                        MAX_SYNC_PAGE_BYTES, scope)
        page = ListingsSyncPage(entries=tuple(entries), next_cursor=next_cursor, more=more)
        self.served_pages += 1
        return seal(self.identity, page.KIND, page, self.next_seq(), self.validator.now_ms())

    # ------------------------------------------------------------------ client
    async def sync_trust_with(self, peer_id: str) -> SyncReport:
        """One trust-report catch-up session (version 2 peers only), from cursor 0."""
        return await self.sync_with(peer_id, trust=True)

    async def sync_with(self, peer_id: str, every_shard: bool = False,
                        trust: bool = False) -> SyncReport:
        """One session: pages from the peer's last cursor until done or a limit is hit.

        ``every_shard``: ask for listings of every shard (a network search for what this node
        does not follow), from a cursor of its own: the periodic, shard-filtered sessions
        moved the usual cursor past listings of other shards."""
        report = SyncReport(peer_id, trust=trust)
        limits = self.limits
        cursors = self.full_cursors if every_shard and self.shards() is not None else self.cursors
        cursor = cursors.get(peer_id, 0)
        if trust:  # the reports held now, from the start; never a listings cursor
            cursors, cursor = {}, 0
        entries_seen = 0
        version = self.peer_versions.get(peer_id, max(limits.versions))
        if trust and version != 2:
            report.stopped = "unsupported"
            return report
        while report.pages < limits.max_pages:
            request = (TrustReportsRequest(cursor=cursor, limit=limits.page_items) if trust
                       else self._request(version, cursor, cursors is self.cursors))
            data = seal(self.identity, request.KIND, request, self.next_seq(),
                        self.validator.now_ms())
            transport = self.transport_v2 if version == 2 else self.transport
            try:
                response = await transport.request_envelope(
                    peer_id, data, limits.request_timeout_s)
            except ProtocolUnsupported as error:
                if version == 2 and 1 in limits.versions and not trust:  # an older peer: ask it version 1
                    version = self.peer_versions[peer_id] = 1
                    continue
                report.stopped = f"failed: {error}"
                break
            except RequestTimeout:
                self._charge(peer_id, SYNC_STALLED, None)
                report.stopped = SYNC_STALLED
                break
            except ReqRespError as error:
                # Oversize frames and invalid or foreign-signed responses are the peer's doing;
                # a reset stream or a lost connection may be an honest peer going away.
                text = str(error)
                charge = "oversize" if "frame over" in text else (
                    "malformed" if "invalid response" in text or "signed by another key" in text
                    else "")
                if charge:
                    self._charge(peer_id, charge, None)
                report.stopped = f"failed: {error}"
                break
            report.pages += 1
            page = response.message()
            if isinstance(page, ErrorReply):
                report.stopped = f"refused: {page.code}"
                break
            if not isinstance(page, ListingsSyncPage):
                self._charge(peer_id, "wrong_topic", response.sender)
                report.stopped = "wrong_topic"
                break
            report.version = version
            if len(page.entries) > limits.page_items or (page.more and page.next_cursor <= cursor):
                self._charge(peer_id, SYNC_OVERRUN, response.sender)
                report.stopped = SYNC_OVERRUN
                break
            for entry in page.entries:
                entries_seen += 1
                await self._take(peer_id, entry, report, SYNCED_TRUST_KINDS if trust else
                                 SYNCABLE_KINDS if version == 2 else SYNCABLE_KINDS_V1)
                if report.rejected >= limits.max_rejects:
                    break
            if report.rejected >= limits.max_rejects:
                report.stopped = "too_many_rejects"
                break
            cursor = max(cursor, page.next_cursor)
            cursors[peer_id] = cursor
            if not page.more:
                break
            if entries_seen >= limits.max_entries:
                report.stopped = "max_entries"
                break
        else:
            report.stopped = "max_pages"
        self.reports = [*self.reports, report][-64:]
        logger.info("listings sync peer=%s v=%d pages=%d accepted=%d ignored=%d rejected=%d "
                    "stop=%s", peer_id, report.version, report.pages, report.accepted,
                    report.ignored, report.rejected, report.stopped)
        return report

    def _request(self, version: int, cursor: int, scoped: bool) -> Message:
        limit = self.limits.page_items
        if version == 1:
            return ListingsSyncRequest(cursor=cursor, limit=limit)
        followed = self.shards() if scoped else None
        if followed is None:
            return ListingsSyncRequestV2(cursor=cursor, limit=limit)
        count, shards = followed
        return ListingsSyncRequestV2(cursor=cursor, limit=limit, shard_count=count,
                                     shards=tuple(sorted(shards)))

    async def _take(self, peer_id: str, entry: bytes, report: SyncReport,
                    kinds: dict[str, str]) -> None:
        try:
            envelope = self.validator.check_synced(entry, kinds)
        except InvalidEnvelope as error:
            relayed_rate = error.reason == RATE_LIMITED and (
                error.sender is None or peer_id_from_public_key(error.sender) != peer_id)
            if error.reason in IGNORE_REASONS or relayed_rate:
                report.ignored += 1
                report.ignore_reasons[error.reason] = report.ignore_reasons.get(error.reason, 0) + 1
                return
            report.rejected += 1
            self._charge(peer_id, error.reason, error.sender)
            return
        if envelope.sender == self.identity.public_key:
            report.ignored += 1
            return
        report.accepted += 1
        try:
            await self.on_entry(kinds[envelope.kind], envelope)
        except Exception:
            logger.exception("synced entry handler failed kind=%s", envelope.kind)

    def _charge(self, peer_id: str, reason: str, sender: bytes | None) -> None:
        self.penalize(Rejection(peer_id=peer_id, reason=reason, topic=LISTINGS_SYNC_PROTOCOL,
                                sender=sender))

    # ------------------------------------------------------------------ loop
    async def run(self, connected: Callable[[], list[str]],
                  task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Sync with every newly connected peer, and again every ``resync_s``."""
        limiter = trio.CapacityLimiter(self.limits.concurrency)
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                now = trio.current_time()
                peers = set(connected())
                for peer in list(self._synced_at):
                    if peer not in peers:  # reconnecting peers are asked again (maybe upgraded)
                        del self._synced_at[peer]
                        self.peer_versions.pop(peer, None)
                for peer in peers - self._running:
                    last = self._synced_at.get(peer)
                    if last is not None and now - last < self.limits.resync_s:
                        continue
                    if self.is_banned(ID.from_base58(peer)):
                        continue
                    self._running.add(peer)
                    self._synced_at[peer] = now
                    nursery.start_soon(self._session, peer, limiter)
                await trio.sleep(self.limits.poll_s)

    async def _session(self, peer: str, limiter: trio.CapacityLimiter) -> None:
        try:
            async with limiter:
                report = await self.sync_with(peer)
                # A joiner (or a node back from downtime) also takes the peer's trust reports,
                # once per peer for as long as this node runs: later ones come by gossip.
                if (report.version == 2 and self._trust_source is not None
                        and peer not in self.trust_synced):
                    self.trust_synced.add(peer)
                    await self.sync_trust_with(peer)
        except Exception:
            logger.exception("listings sync with %s failed", peer)
        finally:
            self._running.discard(peer)
