"""TrustService: one node's trust layer — ledger, reports, EigenTrust, levels, the gate.

Wiring (done by ``node.service``)::

    trust = TrustService(store, config, identity.public_key, management_keys,
                         hormones_halt=lambda: memory.hormones.consolidation_modulation()
                                               .halt_untrusted_ingestion,
                         run_in_store=async_memory.run)
    net.on_reject(trust.on_rejection)
    net.on_trust_report(trust.on_trust_report)
    await nursery.start(trust.run, lambda report: net.publish(TRUST, report), net.ban)
    decision = await async_memory.run(trust.gate, seller_key)        # before ingesting

Threads: methods that write the store (``record``, ``gate``, ``ban``,
``unban``, ``flush_rejections``) run on the store's thread (``run_in_store``,
i.e. ``AsyncMemory.run``). ``level``, ``reputation``, ``app_score``,
``peers_to_ban``, ``build_report`` and ``show`` only read memory and may be
called from anywhere. ``on_rejection`` and ``on_trust_report`` are called from
the event loop and never touch the store: rejections are buffered and written
by the next ``flush_rejections``.

Reputation and levels: see ``docs/trust.md``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import trio

from node.config import NodeConfig
from node.crystals import now_ms
from node.db import Database
from node.net import Rejection
from node.trust import cadence
from node.trust.eigentrust import EigenTrustResult, eigentrust
from node.trust.gate import REASON_OWN, GateDecision, decide
from node.trust.ledger import EventWeights, Ledger, PeerRecord, TrustEvent, peer_key_hex
from node.trust.levels import TrustLevel
from node.trust.network_view import NetworkView, network_view
from node.trust.policy import assess
from node.trust.reports import TrustMatrix, build_report
from protocol.envelope import Envelope
from protocol.identity import peer_id_from_public_key, public_key_from_peer_id
from protocol.messages import TrustEntry, TrustReport

logger = logging.getLogger(__name__)

StoreRunner = Callable[..., Awaitable[Any]]
"""``await runner(function, *args)`` runs ``function(*args)`` on the store's thread."""
Publish = Callable[[TrustReport], Awaitable[Any]]

APP_SCORES: Mapping[TrustLevel, float] = {
    TrustLevel.BANNED: -100.0,
    TrustLevel.UNTRUSTED: -20.0,
    TrustLevel.PROVISIONAL: 0.0,
    TrustLevel.TRUSTED: 5.0,
    TrustLevel.VERIFIED: 10.0,
}
"""Gossipsub application score (P6) per level; banned is below the graylist (−50)."""

MAX_PENDING_REJECTIONS = 10_000
LAST_REPORT_META = "trust.last_report"


class TrustService:
    def __init__(
        self,
        store: Database,
        config: NodeConfig,
        own_key: bytes,
        management_keys: Collection[bytes],
        hormones_halt: Callable[[], bool],
        *,
        run_in_store: StoreRunner | None = None,
        weights: EventWeights | None = None,
        clock: Callable[[], int] = now_ms,
        max_report_senders: int = 4096,
        self_pretrust: bool = True,
        network_size: Callable[[], int] = lambda: 1,
    ) -> None:
        """Loads the ledger from ``store`` (construct on the store's thread or before it is shared)."""
        self.config = config.trust
        self.own_key = bytes(own_key)
        self._own = self.own_key.hex()
        self.management = frozenset(bytes(key).hex() for key in management_keys)
        # Personalised EigenTrust: our own row is a seed of trust next to the management
        # keys, so global trust still flows when management nodes do not trade.
        self.pretrusted = self.management | ({self._own} if self_pretrust else frozenset())
        self.hormones_halt = hormones_halt
        self.clock = clock
        # The network's size as the net layer estimates it (DHT routing table); see cadence.
        self.network_size = network_size
        self._run_in_store = run_in_store
        self.ledger = Ledger(store, weights, clock)
        self._matrix_lock = threading.Lock()
        self._signed: dict[str, bytes] = {}  # sender hex -> its latest report's envelope
        self._own_signed: bytes | None = None
        self.matrix = TrustMatrix(
            self.own_key,
            self.config.report_max_age_s,
            max_report_senders,
            priority=lambda sender: self._network.trust.get(sender, 0.0),
        )
        self._network = NetworkView()
        self._pending: deque[tuple[str, str]] = deque(maxlen=MAX_PENDING_REJECTIONS)
        self._announced_bans: set[str] = set()
        self.last_result: EigenTrustResult | None = None
        self.last_recompute_ms: int | None = None
        # The last report we published survives a restart, so churn (nodes going and coming
        # back) does not add reports: the cadence runs from the last one, not from the start.
        self.last_published, self.last_published_ms = self._load_last_published()
        self.published = 0

    @property
    def thresholds(self) -> tuple[float, float, float]:
        return (
            self.config.untrusted_below,
            self.config.provisional_below,
            self.config.trusted_below,
        )

    # --- evidence (store thread) --------------------------------------------------------------
    def record(
        self, peer_key: bytes | str, event: TrustEvent | str, detail: str = ""
    ) -> PeerRecord | None:
        """Log one interaction with a peer; bans it at ``ban_after_offences`` proven offences.

        Events about ourselves are ignored (None).
        """
        return self._record_all([(peer_key_hex(peer_key), str(event), detail)])

    def _record_all(self, events: list[tuple[str, str, str]]) -> PeerRecord | None:
        events = [item for item in events if item[0] != self._own]
        if not events:
            return None
        records = self.ledger.record_many(events)
        latest: dict[str, PeerRecord] = {record.peer_key: record for record in records}
        for key, record in latest.items():
            if (
                not record.banned
                and record.offences >= self.config.ban_after_offences
                and key not in self.management
            ):
                logger.warning(
                    "banning peer for offences peer_key=%s offences=%d", key, record.offences
                )
                latest[key] = self.ledger.set_banned(
                    key, True, f"banned: {record.offences} offences ({record.last_reason})"
                )
        return latest[records[-1].peer_key]

    def ban(self, peer_key: bytes | str, reason: str = "manual") -> None:
        self.ledger.set_banned(peer_key, True, f"banned: {reason}")

    def unban(self, peer_key: bytes | str) -> None:
        """Lift a ban and forgive past offences (interaction history stays)."""
        key = peer_key_hex(peer_key)
        self.ledger.set_banned(key, False, "unbanned")
        self._announced_bans.discard(key)

    # --- network input (event loop) -------------------------------------------------------------
    def on_rejection(self, rejection: Rejection) -> None:
        """NetService ``on_reject`` hook: hold the rejection against the peer that forwarded it.

        Gossipsub peers validate before forwarding, so an invalid message is the
        forwarder's doing. Buffered; written by ``flush_rejections``.
        """
        try:
            key = public_key_from_peer_id(rejection.peer_id).hex()
        except ValueError:
            return
        if key != self._own:
            self._pending.append((key, rejection.reason))

    def flush_rejections(self) -> int:
        """Write buffered rejections to the ledger (store thread); returns how many."""
        batch: list[tuple[str, str, str]] = []
        while self._pending:
            key, reason = self._pending.popleft()
            batch.append((key, TrustEvent.INVALID_MESSAGE.value, reason))
        self._record_all(batch)
        return len(batch)

    async def on_trust_report(self, envelope: Envelope) -> None:
        """Gossip (and listings-sync) handler for the trust topic (envelope already validated)."""
        message = envelope.message()
        if not isinstance(message, TrustReport):
            return
        if self.add_report(envelope.sender, message, envelope.issued_at_ms):
            # Kept signed, so a joiner can take it by listings sync (``report_page``).
            self._signed[envelope.sender.hex()] = envelope.to_bytes()
            if len(self._signed) > 2 * len(self.matrix) + 64:  # evicted senders: forget them
                with self._matrix_lock:
                    held = {report.sender for report in self.matrix.reports()}
                self._signed = {key: raw for key, raw in self._signed.items() if key in held}

    async def report_page(self, cursor: int, limit: int,
                          max_bytes: int) -> tuple[list[bytes], int, bool]:
        """The latest signed report of every sender held (and ours), for a joiner's catch-up:
        entries after position ``cursor`` in sender order, within ``limit`` and ``max_bytes``."""
        with self._matrix_lock:
            self.matrix.prune(self.clock())
            held = {report.sender for report in self.matrix.reports()}
        # Aged out or evicted from the matrix: not served either.
        self._signed = {key: raw for key, raw in self._signed.items() if key in held}
        signed = [self._signed[key] for key in sorted(self._signed)]
        if self._own_signed is not None:
            signed.append(self._own_signed)
        entries: list[bytes] = []
        size = 0
        position = cursor
        for raw in signed[cursor:cursor + limit]:
            if size + len(raw) > max_bytes:
                break
            entries.append(raw)
            size += len(raw)
            position += 1
        return entries, position, position < len(signed)

    def add_report(self, sender: bytes, report: TrustReport, issued_at_ms: int) -> bool:
        """Keep a received report (not from ourselves, nor from a banned peer); True if kept."""
        record = self.ledger.peer(sender)
        if record is not None and record.banned:
            return False
        with self._matrix_lock:
            return self.matrix.add(sender, report, issued_at_ms, self.clock())

    # --- reports and global trust -----------------------------------------------------------------
    def build_report(self, epoch: int) -> TrustReport:
        """Our row: top 256 peers by ``c_ij`` in ppm, then distrusted (and banned) peers at 0."""
        return build_report(
            self.ledger.normalised_row(), epoch, self.own_key, distrusted=self.ledger.distrusted()
        )

    def _snapshot(self) -> dict[str, dict[str, float]]:
        banned = {record.peer_key for record in self.ledger.peers() if record.banned}
        with self._matrix_lock:
            rows = self.matrix.rows(self.ledger.normalised_row(), self.clock())
        return {sender: row for sender, row in rows.items() if sender not in banned}

    def _compute(self, rows: dict[str, dict[str, float]]) -> EigenTrustResult:
        return eigentrust(
            rows,
            pretrusted=self.pretrusted,
            alpha=self.config.alpha,
            epsilon=self.config.epsilon,
            max_iterations=self.config.max_iterations,
        )

    def _install(self, rows: dict[str, dict[str, float]], result: EigenTrustResult) -> None:
        self._network = network_view(rows, result.trust, self._own, self.pretrusted)
        self.last_result = result
        self.last_recompute_ms = self.clock()

    def recompute(self) -> EigenTrustResult:
        """EigenTrust over the assembled matrix, management keys pre-trusted; cached."""
        rows = self._snapshot()
        result = self._compute(rows)
        self._install(rows, result)
        return result

    async def recompute_async(self) -> EigenTrustResult:
        """``recompute`` with the iteration in a worker thread (large matrices)."""
        rows = self._snapshot()
        result = await trio.to_thread.run_sync(self._compute, rows)
        self._install(rows, result)
        return result

    # --- levels -----------------------------------------------------------------------------------
    def _assess(self, key: str) -> tuple[float | None, float | None, float, TrustLevel]:
        """(local c_ij, global t_j, reputation, level) of a hex key."""
        if key == self._own:
            return None, self._network.trust.get(key), 1.0, TrustLevel.VERIFIED
        record = self.ledger.peer(key)
        row = self.ledger.normalised_row()
        evidence = record is not None and record.has_evidence
        local = row.get(key, 0.0) if evidence else None
        local_raw = record.local_trust if record is not None and evidence else None
        global_ = self._network.global_trust(key)
        score, level = assess(
            local,
            local_raw,
            global_,
            len(self._network.trust),
            len(row),
            vouch=self._network.vouch.get(key, 0.0),
            distrust=self._network.distrust.get(key, 0.0),
            is_management=key in self.management,
            banned=record is not None and record.banned,
            thresholds=self.thresholds,
            satisfactory=record.satisfactory if record is not None else 0.0,
            unsatisfactory=record.unsatisfactory if record is not None else 0.0,
            offences=record.offences if record is not None else 0,
        )
        return local, global_, score, level

    def level(self, peer_key: bytes | str) -> TrustLevel:
        return self._assess(peer_key_hex(peer_key))[3]

    def reputation(self, seller_key: bytes) -> float:
        """The market's ReputationSource: 0 for banned, 1 for verified keys, else the score."""
        _, _, score, level = self._assess(peer_key_hex(seller_key))
        if level is TrustLevel.BANNED:
            return 0.0
        if level is TrustLevel.VERIFIED:
            return 1.0
        return score

    def gate(self, peer_key: bytes | str, kind: str = "skill") -> GateDecision:
        """May ``kind`` from this peer be ingested? The decision is logged (store thread)."""
        key = peer_key_hex(peer_key)
        if key == self._own:
            return GateDecision(True, TrustLevel.VERIFIED, REASON_OWN)
        decision = decide(self.level(key), self.hormones_halt())
        self.ledger.record_decision(
            key, kind, decision.admitted, decision.level.value, decision.reason
        )
        if not decision.admitted:
            logger.info(
                "ingestion rejected peer_key=%s kind=%s level=%s reason=%s",
                key,
                kind,
                decision.level.value,
                decision.reason,
            )
        return decision

    def app_score(self, peer_id: str) -> float:
        """Gossipsub application-specific score of a peer id (see ``APP_SCORES``)."""
        try:
            key = public_key_from_peer_id(peer_id).hex()
        except ValueError:
            return 0.0
        return APP_SCORES[self._assess(key)[3]]

    def peers_to_ban(self) -> list[bytes]:
        """Public keys at level banned; ``peer_id_from_public_key`` gives ``net.ban``'s id."""
        return [bytes.fromhex(record.peer_key) for record in self.ledger.peers() if record.banned]

    def show(self) -> list[dict[str, Any]]:
        """One row per known peer for ``crystalmesh trust show``; best first."""
        records = {record.peer_key: record for record in self.ledger.peers()}
        keys = set(records) | set(self._network.trust) | set(self.management)
        keys.discard(self._own)
        ranked = []
        for key in keys:
            local, global_, score, level = self._assess(key)
            record = records.get(key)
            ranked.append(
                (
                    (-level.rank, -score, key),
                    {
                        "peer_key": key,
                        "peer_id": peer_id_from_public_key(bytes.fromhex(key)),
                        "local": None if local is None else round(local, 6),
                        "global": None if global_ is None else round(global_, 6),
                        "reputation": round(score, 4),
                        "level": level.value,
                        "last_reason": record.last_reason if record else "",
                        "local_raw": round(record.local_trust, 4) if record else 0.0,
                        "events": record.events if record else 0,
                        "offences": record.offences if record else 0,
                        "management": key in self.management,
                    },
                )
            )
        ranked.sort(key=lambda item: item[0])
        return [row for _, row in ranked]

    # --- background -------------------------------------------------------------------------------
    def _maintain(self) -> None:
        self.flush_rejections()
        self.ledger.prune()

    async def _in_store(self, function: Callable[[], Any]) -> Any:
        if self._run_in_store is None:
            return function()
        return await self._run_in_store(function)

    # --- cadence (node/trust/cadence.py) -------------------------------------------------------
    def estimated_nodes(self) -> int:
        """The network's size: the net layer's estimate or the report senders we hold."""
        try:
            estimate = int(self.network_size())
        except Exception:
            logger.exception("network size estimate failed")
            estimate = 1
        return max(estimate, len(self.matrix) + 1)

    def report_intervals_s(self) -> tuple[float, float]:
        """(least time between our reports, refresh of an unchanged row) at today's size."""
        interval = cadence.report_interval_s(
            self.estimated_nodes(),
            self.config.report_interval_s,
            self.config.report_target_per_s,
            self.config.report_max_interval_s,
        )
        return interval, cadence.refresh_interval_s(interval, self.config.report_refresh_s)

    def _load_last_published(self) -> tuple[TrustReport | None, int | None]:
        saved = self.ledger.db.get_meta(LAST_REPORT_META)
        if saved is None:
            return None, None
        try:
            state = json.loads(saved)
            row = tuple(TrustEntry(bytes.fromhex(peer), int(ppm)) for peer, ppm in state["row"])
            return TrustReport(epoch=int(state["epoch"]), row=row), int(state["at_ms"])
        except (ValueError, TypeError, KeyError):
            logger.warning("ignoring an unreadable %s", LAST_REPORT_META)
            return None, None

    def _save_last_published(self, report: TrustReport, at_ms: int) -> None:
        row = [[entry.peer.hex(), entry.weight_ppm] for entry in report.row]
        state = {"at_ms": at_ms, "epoch": report.epoch, "row": row}
        self.ledger.db.set_meta(LAST_REPORT_META, json.dumps(state))

    def _due(self, report: TrustReport, now_ms: int) -> bool:
        interval, refresh = self.report_intervals_s()
        with self._matrix_lock:
            self.matrix.max_age_ms = int(
                cadence.receiver_max_age_s(refresh, self.config.report_max_age_s) * 1000
            )
        since = None if self.last_published_ms is None else (now_ms - self.last_published_ms) / 1000
        if since is not None and since < 0:  # the clock went back: do not go silent until it catches up
            since = None
        return cadence.should_publish(
            since,
            cadence.row_change_ppm(self.last_published, report),
            self.published,
            interval_s=interval,
            refresh_s=refresh,
            change_threshold_ppm=self.config.report_change_ppm,
            startup_reports=self.config.report_startup_reports,
        )

    async def tick(
        self, publish: Publish, ban: Callable[[str], None] | None = None
    ) -> TrustReport | None:
        """One round: flush rejections, recompute, hand out new bans, and publish our report
        when the cadence says it is due; returns the report published, or None."""
        await self._in_store(self._maintain)
        await self.recompute_async()
        now = self.clock()
        report = self.build_report(epoch=now // 1000)
        due = self._due(report, now)
        if due:
            self.last_published, self.last_published_ms = report, now
            self.published += 1
            await self._in_store(lambda: self._save_last_published(report, now))
            try:
                sent = await publish(report)
                if isinstance(sent, Envelope):
                    self._own_signed = sent.to_bytes()
            except Exception:
                logger.exception("publishing trust report failed")
        if ban is not None:
            for key in self.peers_to_ban():
                hex_key = key.hex()
                if hex_key not in self._announced_bans:
                    self._announced_bans.add(hex_key)
                    ban(peer_id_from_public_key(key))
        return report if due else None

    async def run(
        self,
        publish: Publish,
        ban: Callable[[str], None] | None = None,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Every ``report_interval_s``: ``tick`` (which publishes only when due). Report
        epochs are unix seconds."""
        task_status.started()
        while True:
            await self.tick(publish, ban)
            await trio.sleep(self.config.report_interval_s)


def trust_rows_for_api(service: TrustService) -> list[dict[str, Any]]:
    """JSON rows for ``GET /trust`` and ``crystalmesh trust show`` (see docs/trust.md)."""
    return service.show()
