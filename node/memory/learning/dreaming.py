"""What a dream writes into the store: insight crystals, their sources, dream marks, proposals.

The rules (what counts as an insight, the 0.3 floor, the 7 / 14-day schedule) are in
:mod:`node.memory.learning.insights`; this module reads a dream's new material and
applies a dream's findings, each in one transaction:

1. :func:`new_material` — the crystals of one namespace added since the previous dream
   read (a rowid cursor per namespace, so a transcript ingested late is still new):
   scratch notes and other things the user or agent stored (source ``memory``, origin
   ``session`` / ``user_input``) and session turns (source ``sessions``), never files,
   skills, bought or inherited text, or what a dream or consolidation wrote itself.
2. :func:`apply_findings` — new insights (origin ``dream``, type ``insight`` unless a
   classifier said otherwise, lifespan ``ttl`` 14 days, a knowledge row at 0.3 with
   provenance ``dream``, a provenance node whose parents are the sources, one
   ``dream_insight_sources`` row per source); sightings of live insights (confidence,
   confirmation, TTL); directive proposals (pending: the user confirms); seed 000's
   ``dreamCount`` / ``lastDreamedAt`` for every crystal read or written; the cursor.

An insight is never stored without a source: :func:`apply_findings` refuses a
candidate with none (``InsightWithoutSource``) before writing anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from node.crystals import (
    AccessScope,
    Crystal,
    LifespanPolicy,
    Origin,
    ProvenanceNode,
    ProvenanceOperation,
    SemanticType,
    Source,
    provenance,
)
from node.memory.learning import confidence as conf
from node.memory.learning import insights
from node.memory.learning.insight_schema import CONCEPT, MIGRATIONS
from node.memory.learning.knowledge import KnowledgeRow, KnowledgeStore, Provenance, audit, upsert
from node.memory.search import MemoryInputError

if TYPE_CHECKING:
    import sqlite3

    from node.db import Database
    from node.memory.owner import MemoryOwner as Memory

log = logging.getLogger(__name__)

MAX_SOURCES_PER_DREAM = 200
"""Crystals one dream reads for insights; the rest wait for the next dream (the cursor). With at
most 5 statements a source, a dream embeds at most 1,000 new insights (~1.5 s of MiniLM here)."""
DREAM_PATH = "dream:{namespace}"
MINED_SOURCES = (Source.MEMORY.value, Source.SESSIONS.value)
MINED_ORIGINS = (Origin.SESSION.value, Origin.USER_INPUT.value)
NOT_MINED_TYPES = ("skill", "task_pattern", "insight", "directive", "warning")
_SCOPE_RANK = {AccessScope.PUBLIC: 0, AccessScope.SHARED: 1, AccessScope.PRIVATE: 2, AccessScope.CONFIDENTIAL: 3}


class Beliefs(Protocol):
    """What a dream needs of ``node.memory.learning.Learning`` (it sits above this module)."""

    insights: InsightStore
    knowledge: KnowledgeStore

    def confidence(self, crystal: Crystal, row: KnowledgeRow | None, at_ms: int) -> float: ...


class InsightWithoutSource(MemoryInputError):
    """An insight must name at least one crystal it was read from (its provenance)."""


class ProposalNotFound(MemoryInputError):
    """No pending directive proposal with this id in this namespace."""

    http_status = 404
    code = "proposal_not_found"


def cursor_key(namespace: str) -> str:
    return f"insights:{namespace}:cursor"


@dataclass(frozen=True)
class Material:
    """A dream's new material: the sources it reads, and where its cursor will stand after."""

    sources: list[insights.SourceText]
    scopes: dict[str, AccessScope]
    next_cursor: int
    more: bool  # the batch was full: more new material waits


@dataclass
class InsightReport:
    read: int = 0
    candidates: int = 0
    created: list[str] = field(default_factory=list)
    sighted: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)
    proposals: list[str] = field(default_factory=list)
    classified_by: str = "rules"
    more: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"read": self.read, "candidates": self.candidates, "created": len(self.created),
                "sighted": len(self.sighted), "confirmed": len(self.confirmed),
                "proposals": len(self.proposals), "classified_by": self.classified_by,
                "more_waiting": self.more}


class InsightStore:
    """Reads and writes of the ``insights`` concept over the node's one database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate(CONCEPT, MIGRATIONS)

    def live(self, namespace: str, at_ms: int) -> list[tuple[str, str, frozenset[str]]]:
        """Live insights of ``namespace``: (id, kind, content terms of the statement)."""
        rows = self.db.all(
            "SELECT d.crystal_id, d.kind, c.text FROM dream_insights d JOIN crystals c ON c.id = d.crystal_id "
            "WHERE d.namespace=? AND c.lifecycle NOT IN ('expired', 'archived') AND c.deleted_at_ms IS NULL "
            "AND (c.expires_at_ms IS NULL OR c.expires_at_ms > ?) ORDER BY d.born_at_ms, d.crystal_id",
            (namespace, at_ms))
        return [(row[0], row[1], insights.content_terms(str(row[2]).split(": ", 1)[-1])) for row in rows]

    def row(self, insight_id: str) -> sqlite3.Row | None:
        return self.db.one("SELECT * FROM dream_insights WHERE crystal_id=?", (insight_id,))

    def sources(self, insight_id: str) -> list[str]:
        return [row[0] for row in self.db.all(
            "SELECT source_id FROM dream_insight_sources WHERE insight_id=? ORDER BY added_at_ms, source_id",
            (insight_id,))]

    def confirm(self, insight_id: str, at_ms: int) -> bool:
        """Mark a dream insight confirmed (by the user's ``feedback useful``); True if it was not yet."""
        with self.db.transaction() as conn:
            return bool(conn.execute(
                "UPDATE dream_insights SET confirmed_at_ms=? WHERE crystal_id=? AND confirmed_at_ms IS NULL",
                (at_ms, insight_id)).rowcount)

    def mark(self, crystal_id: str) -> dict[str, Any] | None:
        """Seed 000's ``dreamCount`` and ``lastDreamedAt`` of a crystal (None: never dreamt)."""
        row = self.db.one("SELECT dream_count, last_dreamed_at_ms FROM dream_marks WHERE crystal_id=?",
                          (crystal_id,))
        return None if row is None else {"dreamCount": int(row[0]), "lastDreamedAt": int(row[1])}

    def proposals(self, namespace: str, status: str | None = "pending") -> list[dict[str, Any]]:
        rows = self.db.all(
            "SELECT * FROM directive_proposals WHERE namespace=? AND (? IS NULL OR status=?) "
            "ORDER BY proposed_at_ms, id", (namespace, status, status))
        return [proposal_dict(row) for row in rows]

    def proposal(self, proposal_id: str, namespace: str) -> dict[str, Any]:
        row = self.db.one("SELECT * FROM directive_proposals WHERE id=? AND namespace=?", (proposal_id, namespace))
        if row is None:
            raise ProposalNotFound(f"no directive proposal {proposal_id!r} in {namespace!r}")
        return proposal_dict(row)

    def decide(self, proposal_id: str, namespace: str, status: str, at_ms: int, crystal_id: str | None) -> None:
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE directive_proposals SET status=?, decided_at_ms=?, crystal_id=? "
                "WHERE id=? AND namespace=? AND status='pending'",
                (status, at_ms, crystal_id, proposal_id, namespace)).rowcount
            if not changed:
                raise ProposalNotFound(f"no pending directive proposal {proposal_id!r} in {namespace!r}")
            audit(conn, crystal_id, f"directive_{status}", at_ms, None, None,
                  {"proposal": proposal_id, "namespace": namespace})


def proposal_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "namespace": row["namespace"], "text": row["text"],
            "source_ids": json.loads(row["source_ids_json"]), "proposed_at_ms": row["proposed_at_ms"],
            "status": row["status"], "decided_at_ms": row["decided_at_ms"], "crystal_id": row["crystal_id"]}


def new_material(memory: Memory, namespace: str, limit: int = MAX_SOURCES_PER_DREAM) -> Material:
    """The crystals of ``namespace`` added since the cursor that a dream mines (module docstring)."""
    cursor = int(memory.store.get_meta(cursor_key(namespace)) or 0)
    top = memory.db.one("SELECT COALESCE(MAX(rowid), 0) FROM crystals")
    high = int(top[0]) if top is not None else 0
    marks = ",".join("?" * len(NOT_MINED_TYPES))
    rows = memory.db.all(
        "SELECT c.rowid, c.id, c.text, c.access_scope, "
        "(SELECT t.speaker FROM conversation_turns t WHERE t.crystal_id = c.id LIMIT 1) AS speaker "
        "FROM crystals c WHERE c.rowid > ? AND c.rowid <= ? AND c.namespace = ? "
        "AND c.deleted_at_ms IS NULL AND c.valid_to_ms IS NULL AND c.lifecycle NOT IN ('expired', 'archived') "
        f"AND c.source IN (?, ?) AND c.origin IN (?, ?) AND c.semantic_type NOT IN ({marks}) "
        "ORDER BY c.rowid LIMIT ?",
        (cursor, high, namespace, *MINED_SOURCES, *MINED_ORIGINS, *NOT_MINED_TYPES, limit))
    more = len(rows) >= limit
    sources, scopes = [], {}
    for row in rows:
        speaker = row["speaker"]
        sources.append(insights.SourceText(str(row["id"]), str(row["text"]),
                                           None if speaker is None else str(speaker)[:64]))
        try:
            scopes[str(row["id"])] = AccessScope(row["access_scope"])
        except ValueError:  # a tampered row: treat its text as the most private
            scopes[str(row["id"])] = AccessScope.CONFIDENTIAL
    next_cursor = int(rows[-1]["rowid"]) if more else max(cursor, high)
    return Material(sources, scopes, next_cursor, more)


def apply_findings(memory: Memory, beliefs: Beliefs, namespace: str, material: Material,
                   candidates: Sequence[insights.Candidate], classes: dict[int, insights.Classification],
                   at_ms: int, classified_by: str = "rules") -> InsightReport:
    """Write what a dream found (module docstring); returns what changed. ``beliefs``: the
    memory's ``Learning`` (its confidence rows and insight tables)."""
    for candidate in candidates:
        if not candidate.source_ids:
            raise InsightWithoutSource(f"insight {candidate.statement[:60]!r} names no source")
    store = beliefs.insights
    report = InsightReport(read=len(material.sources), candidates=len(candidates),
                           classified_by=classified_by, more=material.more)
    live = insights.LiveInsights(store.live(namespace, at_ms))
    fresh: list[tuple[insights.Candidate, insights.Classification | None]] = []
    sightings: dict[str, list[str]] = {}
    for index, candidate in enumerate(candidates):
        known = live.match(candidate)
        if known is not None:
            linked = set(store.sources(known))
            new_sources = [s for s in candidate.source_ids if s not in linked and s not in sightings.get(known, [])]
            if new_sources:
                sightings.setdefault(known, []).extend(new_sources)
        else:
            fresh.append((candidate, classes.get(index)))
        cls = classes.get(index)
        if cls is not None and cls.directive:
            report.proposals.append(candidate.statement)
    crystals = [_insight_crystal(memory, namespace, candidate, cls, material.scopes, at_ms)
                for candidate, cls in fresh]

    def write(conn: sqlite3.Connection, results: list[Any]) -> None:
        touched: list[str] = []
        for crystal, result, (candidate, cls) in zip(crystals, results, fresh, strict=True):
            if not result.created:
                continue  # this exact text is already a live crystal of the namespace
            _born(conn, memory, namespace, crystal, candidate, cls, at_ms, classified_by)
            report.created.append(crystal.id)
            touched.append(crystal.id)
        for insight_id, source_ids in sorted(sightings.items()):
            if _sighted(conn, memory, beliefs, insight_id, source_ids, at_ms):
                report.confirmed.append(insight_id)
            report.sighted.append(insight_id)
            touched.append(insight_id)
        for statement in report.proposals:
            _propose(conn, namespace, statement, candidates, at_ms)
        _mark(conn, [source.crystal_id for source in material.sources] + touched, at_ms)
        conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (cursor_key(namespace), str(material.next_cursor)))

    if crystals:
        # Derived text: its words already moved the hormones when its sources were stored.
        levels = dict(memory.hormones.levels)
        memory.add_crystals(crystals, beside=write)
        memory.hormones.levels.update(levels)
    else:
        with memory.db.transaction() as conn:
            write(conn, [])
    if report.created or report.sighted:
        log.info("dream insights in %s: %d new, %d sighted, %d confirmed, %d proposals", namespace,
                 len(report.created), len(report.sighted), len(report.confirmed), len(report.proposals))
    return report


def _insight_crystal(memory: Memory, namespace: str, candidate: insights.Candidate,
                     cls: insights.Classification | None, scopes: dict[str, AccessScope], at_ms: int) -> Crystal:
    scope = max((scopes.get(s, AccessScope.CONFIDENTIAL) for s in candidate.source_ids), key=_SCOPE_RANK.__getitem__)
    crystal = memory.prepare(
        candidate.text(), semantic_type=SemanticType(cls.semantic_type) if cls else SemanticType.INSIGHT,
        origin=Origin.DREAM, source=Source.MEMORY, path=DREAM_PATH.format(namespace=namespace), scope=scope,
        lifespan=LifespanPolicy.TTL, ttl_ms=insights.EXPIRE_AFTER_MS, actor=provenance.DREAM_ENGINE,
        namespace=namespace)
    crystal.created_at_ms = crystal.valid_from_ms = at_ms
    crystal.importance_score = conf.DREAM_CONFIDENCE_FLOOR
    crystal.provenance_dag = [ProvenanceNode(crystal.id, ProvenanceOperation.CREATED, provenance.DREAM_ENGINE,
                                             at_ms, list(candidate.source_ids),
                                             {"kind": candidate.kind.value})]
    return crystal


def _born(conn: sqlite3.Connection, memory: Memory, namespace: str, crystal: Crystal,
          candidate: insights.Candidate, cls: insights.Classification | None, at_ms: int,
          classified_by: str) -> None:
    conn.execute(
        "INSERT INTO dream_insights(crystal_id, namespace, kind, born_at_ms, last_seen_ms, sightings, "
        "confirmed_at_ms, classified_by) VALUES (?, ?, ?, ?, ?, 1, NULL, ?)",
        (crystal.id, namespace, candidate.kind.value, at_ms, at_ms, classified_by if cls else "rules"))
    conn.executemany(
        "INSERT OR IGNORE INTO dream_insight_sources(insight_id, source_id, added_at_ms) VALUES (?, ?, ?)",
        [(crystal.id, source, at_ms) for source in candidate.source_ids])
    upsert(conn, KnowledgeRow(crystal.id, conf.DREAM_CONFIDENCE_FLOOR, at_ms, len(candidate.source_ids), 0,
                              Provenance.DREAM, None, namespace))
    # each source is a use of the insight (as each episode of a fact): importance, energy
    memory.store.record_access([crystal.id] * len(candidate.source_ids), at_ms)
    audit(conn, crystal.id, "insight_born", at_ms, None, f"{conf.DREAM_CONFIDENCE_FLOOR:.6f}",
          {"kind": candidate.kind.value, "sources": list(candidate.source_ids),
           "classified": cls.kind if cls else None})


def _sighted(conn: sqlite3.Connection, memory: Memory, beliefs: Beliefs, insight_id: str, source_ids: list[str],
             at_ms: int) -> bool:
    """One more sighting of a live insight; True when this one confirmed it."""
    row = beliefs.insights.row(insight_id)
    knowledge = beliefs.knowledge.get(insight_id)
    if row is None:
        return False
    crystal = memory.store.get(insight_id)
    before = beliefs.confidence(crystal, knowledge, at_ms)
    was_confirmed = row["confirmed_at_ms"] is not None
    seen = insights.sight(before, int(row["last_seen_ms"]), was_confirmed, at_ms)
    conn.executemany(
        "INSERT OR IGNORE INTO dream_insight_sources(insight_id, source_id, added_at_ms) VALUES (?, ?, ?)",
        [(insight_id, source, at_ms) for source in source_ids])
    memory.store.record_access([insight_id] * len(source_ids), at_ms)
    confirmed_now = seen.confirmed and not was_confirmed
    conn.execute(
        "UPDATE dream_insights SET last_seen_ms=?, sightings=sightings+1, confirmed_at_ms=COALESCE(confirmed_at_ms, ?) "
        "WHERE crystal_id=?", (at_ms, at_ms if seen.confirmed else None, insight_id))
    upsert(conn, KnowledgeRow(insight_id, seen.confidence, at_ms,
                              (knowledge.episode_count if knowledge else 1) + len(source_ids), 0,
                              Provenance.DREAM, None, crystal.namespace))
    if confirmed_now:
        set_lifespan(memory, crystal, LifespanPolicy.DECAY, None, "insight_confirmed")
    elif not seen.confirmed and seen.expires_at_ms is not None:
        set_lifespan(memory, crystal, LifespanPolicy.TTL, seen.expires_at_ms - crystal.created_at_ms,
                     "insight_renewed")
    audit(conn, insight_id, "insight_sighted", at_ms, f"{before:.6f}", f"{seen.confidence:.6f}",
          {"sources": source_ids, "confirmed": seen.confirmed})
    return confirmed_now


def set_lifespan(memory: Memory, crystal: Crystal, policy: LifespanPolicy, ttl_ms: int | None,
                 action: str) -> None:
    """An insight's lifespan: ``decay`` once confirmed, or ``ttl`` renewed (counted, as at insert,
    from its ``created_at_ms``); the governance JSON and the expiry column together, audited."""
    governance = replace(crystal.governance, lifespan_policy=policy,
                         ttl_ms=ttl_ms if policy is LifespanPolicy.TTL else None)
    expires = crystal.created_at_ms + ttl_ms if policy is LifespanPolicy.TTL and ttl_ms else None
    memory.store.update_fields(crystal.id, action, governance_json=json.dumps(governance.to_dict()),
                               expires_at_ms=expires)


def _propose(conn: sqlite3.Connection, namespace: str, statement: str,
             candidates: Sequence[insights.Candidate], at_ms: int) -> None:
    sources = next((c.source_ids for c in candidates if c.statement == statement), [])
    proposal_id = hashlib.sha256(f"{namespace}\n{statement}".encode()).hexdigest()[:16]
    conn.execute(
        "INSERT OR IGNORE INTO directive_proposals(id, namespace, text, source_ids_json, proposed_at_ms, status) "
        "VALUES (?, ?, ?, ?, ?, 'pending')", (proposal_id, namespace, statement, json.dumps(sources), at_ms))


def _mark(conn: sqlite3.Connection, crystal_ids: Sequence[str], at_ms: int) -> None:
    """Seed 000: ``dreamCount`` + 1 and ``lastDreamedAt`` for every crystal this dream processed."""
    conn.executemany(
        "INSERT INTO dream_marks(crystal_id, dream_count, last_dreamed_at_ms) "
        "SELECT id, 1, ? FROM crystals WHERE id=? "
        "ON CONFLICT(crystal_id) DO UPDATE SET dream_count=dream_count+1, last_dreamed_at_ms=excluded.last_dreamed_at_ms",
        [(at_ms, crystal_id) for crystal_id in dict.fromkeys(crystal_ids)])
