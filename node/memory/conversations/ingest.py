"""A checked conversation stored as memories, and the origin of a turn read back.

Runs on the database's thread with a :class:`node.memory.facade.Memory`. Each
turn becomes one crystal whose text is ``"(<session date>) <speaker>: <text>"``
(`` [shares <caption>]`` for a shared photo, then each resolved relative date as
``[last Saturday = 6 May 2023]``), ``valid_from`` the turn's own time or else the
session's time plus one second per turn (so the order survives), a ``permanent`` lifespan (a transcript
is a record: it does not decay away) and a row in ``conversation_turns``.

Order of work: the whole file is judged first (:func:`read_conversation`), the
turns already stored are left out, the rest are embedded in batches (the slow
part, with progress), and only then are the crystals and their rows written in
one transaction, so a refused file or a crash leaves nothing half-stored.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from node.crystals import Crystal, LifespanPolicy, Origin, SemanticType, Source, now_ms
from node.memory.conversations.dates import resolve_relative
from node.memory.conversations.parse import (
    Conversation,
    ConversationRefused,
    Turn,
    read_conversation,
)
from node.memory.namespaces import validate_namespace

if TYPE_CHECKING:
    from node.db import Database
    from node.memory.search import SearchHit

Progress = Callable[[int, int], None]
Beside = Callable[[sqlite3.Connection, list[Any]], None]


class TurnMemory(Protocol):
    """What turn ingestion (conversations and session transcripts) needs of a node's memory (``node.memory.facade.Memory``, which calls back here)."""

    db: Database

    def prepare(self, text: str, **kwargs: Any) -> Crystal: ...
    def embed_windows(self, texts: Sequence[str],
                      packed: bool = False) -> tuple[np.ndarray, list[np.ndarray | None]]: ...
    def second_opinions(self, crystals: Sequence[Crystal], packed: bool = False) -> None: ...
    def add_crystals(self, crystals: Sequence[Crystal], vectors: np.ndarray | None = None,
                     windows: Sequence[np.ndarray | None] | None = None,
                     beside: Beside | None = None) -> list[Any]: ...
    def get(self, crystal_id: str) -> Crystal: ...


EMBED_BATCH = 256  # texts per embedder call (and per progress line); each packed by token count
MAX_WINDOW = 20  # turns either side of a hit
# Skills and task patterns can be sold and warnings rank first: a transcript's turns are none of these.
NOT_TURNS = frozenset({SemanticType.SKILL, SemanticType.TASK_PATTERN, SemanticType.WARNING})
TURN_STEP_MS = 1000  # valid_from of turn i of a session: the session's time + i seconds
_COLUMNS = ("conversation, source_id, crystal_id, speaker, session, session_index, turn_index, "
            "session_date, at_ms")


def turn_text(turn: Turn) -> str:
    """What is stored and searched for one turn (see the module docstring)."""
    text = f"{turn.speaker}: {turn.text}".rstrip()
    if turn.session_date:
        text = f"({turn.session_date}) {text}"
    if turn.caption:
        text += f" [shares {turn.caption}]"
    if turn.at is not None:
        for resolved in resolve_relative(turn.text, turn.at.date()):
            text += " " + resolved.note()
    return text


def _valid_from(turn: Turn) -> int | None:
    if turn.at is None:
        return None
    at_ms = int(turn.at.timestamp() * 1000)
    return at_ms if turn.own_time else at_ms + turn.turn_index * TURN_STEP_MS


@dataclass
class Plan:
    """A judged conversation's turns not stored yet, as crystals; then their vectors."""

    conversation: Conversation
    namespace: str
    todo: list[Turn]
    crystals: list[Crystal]
    started: float
    vectors: np.ndarray | None = None
    windows: list[np.ndarray | None] = field(default_factory=list)
    embedded: float = 0.0


def plan_ingest(memory: TurnMemory, data: bytes, namespace: str | None = None,
                semantic_type: str = SemanticType.GENERAL.value) -> Plan:
    """Judge the file (:class:`ConversationRefused` if unsound) and prepare the turns not yet stored."""
    started = time.perf_counter()
    space = validate_namespace(namespace)
    kind = SemanticType(semantic_type)
    if kind in NOT_TURNS:
        raise ConversationRefused(f"a turn is what someone said, not a {kind.value}: choose another type")
    conversation = read_conversation(data)
    known = {row[0] for row in memory.db.all(
        "SELECT source_id FROM conversation_turns WHERE namespace=? AND conversation=?",
        (space, conversation.key))}
    todo = [turn for turn in conversation.turns if turn.source_id not in known]
    path = f"conversation:{conversation.key}"
    crystals = [memory.prepare(turn_text(turn), semantic_type=kind, origin=Origin.SESSION,
                               source=Source.SESSIONS, path=path, lifespan=LifespanPolicy.PERMANENT,
                               namespace=space, valid_from_ms=_valid_from(turn)) for turn in todo]
    return Plan(conversation, space, todo, crystals, started)


class Embeddable(Protocol):
    """A plan of crystals to embed: a conversation's (:class:`Plan`) or a transcript chunk's."""

    crystals: list[Crystal]
    vectors: np.ndarray | None
    windows: list[np.ndarray | None]
    embedded: float


P = TypeVar("P", bound=Embeddable)


def embed_plan(memory: TurnMemory, plan: P, progress: Progress | None = None) -> P:
    """The vectors of the plan's crystals (and their second opinion's), in batches: no database,
    so ``AsyncMemory`` runs this off the single writer."""
    vectors: list[np.ndarray] = []
    for start in range(0, len(plan.crystals), EMBED_BATCH):
        batch = plan.crystals[start:start + EMBED_BATCH]
        # Packed batches: ~30 % less CPU per turn (docs/benchmarks.md "Conversation ingest").
        batch_vectors, batch_windows = memory.embed_windows([crystal.text for crystal in batch], packed=True)
        memory.second_opinions(batch, packed=True)  # here, not under the writer (add_crystals skips what has one)
        vectors.extend(batch_vectors)
        plan.windows.extend(batch_windows)
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(plan.crystals)), len(plan.crystals))
    plan.vectors = np.vstack(vectors) if vectors else None
    plan.embedded = time.perf_counter()
    return plan


def store_plan(memory: TurnMemory, plan: Plan) -> dict[str, Any]:
    """Write the plan's crystals and their turn rows in one transaction; what was added."""
    at = now_ms()
    added = [0]

    def write_turns(conn: sqlite3.Connection, results: list[Any]) -> None:
        cursor = conn.executemany(
            f"INSERT OR IGNORE INTO conversation_turns(namespace, {_COLUMNS}, ingested_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(plan.namespace, plan.conversation.key, turn.source_id, result.id, turn.speaker, turn.session,
              turn.session_index, turn.turn_index, turn.session_date, _valid_from(turn), at)
             for turn, result in zip(plan.todo, results, strict=True)])
        added[0] = cursor.rowcount

    created = 0
    if plan.crystals:
        results = memory.add_crystals(plan.crystals, plan.vectors, plan.windows, beside=write_turns)
        created = sum(1 for result in results if result.created)
    elapsed = time.perf_counter() - plan.started
    turns = plan.conversation.turns
    return {"conversation": plan.conversation.key, "namespace": plan.namespace, "turns": len(turns),
            "added": added[0], "already_stored": len(turns) - added[0], "new_crystals": created,
            "sessions": plan.conversation.sessions, "speakers": list(plan.conversation.speakers),
            "embed_s": round(max(plan.embedded - plan.started, 0.0), 3), "total_s": round(elapsed, 3),
            "turns_per_s": round(len(plan.todo) / elapsed, 1) if plan.todo and elapsed > 0 else None}


def ingest_conversation(memory: TurnMemory, data: bytes, namespace: str | None = None,
                        semantic_type: str = SemanticType.GENERAL.value,
                        progress: Progress | None = None) -> dict[str, Any]:
    """Store every turn of a conversation file not stored before; a summary of what happened.

    Raises :class:`ConversationRefused` (nothing stored) for a file that is not sound.
    ``AsyncMemory`` runs the same three steps, embedding off the database's thread.
    """
    plan = plan_ingest(memory, data, namespace, semantic_type)
    return store_plan(memory, embed_plan(memory, plan, progress))


def session_keys(memory_db: Database, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
    """The session ``(namespace, conversation, session)`` of each of ``rowids`` (crystal rowids)
    that is a stored conversation turn; search ranks a turn with its session's. Values are read
    as stored (a crafted row can only regroup turns, which changes an order, never a result set)."""
    if not rowids:
        return {}
    rows = memory_db.all(
        "SELECT c.rowid AS rowid, t.namespace AS namespace, t.conversation AS conversation, t.session AS session "
        "FROM crystals c JOIN conversation_turns t ON t.crystal_id = c.id "
        "WHERE c.rowid IN (SELECT value FROM json_each(?))", (json.dumps(sorted(set(rowids))),))
    return {row["rowid"]: (row["namespace"], row["conversation"], row["session"]) for row in rows}


def _turn_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {"source_id": row["source_id"], "conversation": row["conversation"], "speaker": row["speaker"],
            "session": row["session"], "turn_index": row["turn_index"], "session_date": row["session_date"],
            "at_ms": row["at_ms"]}


def _rows_of(memory_db: Database, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
    if not ids:
        return {}
    rows = memory_db.all(
        f"SELECT * FROM conversation_turns WHERE crystal_id IN ({','.join('?' * len(ids))}) "
        "ORDER BY session_index DESC, turn_index DESC", tuple(ids))
    return {row["crystal_id"]: row for row in rows}  # the earliest turn of a repeated text wins


def attach_turns(memory: TurnMemory, hits: Sequence[SearchHit]) -> None:
    """Give each hit that is a conversation turn its origin (``source_id``, speaker, session, ...).

    A later version of a turn's memory keeps the turn's origin (matched by ``memory_id``).
    """
    ids = list(dict.fromkeys(i for hit in hits for i in (hit.crystal.id, hit.crystal.memory_id)))
    rows = _rows_of(memory.db, ids)
    for hit in hits:
        row = rows.get(hit.crystal.id) or rows.get(hit.crystal.memory_id)
        if row is not None:
            hit.turn = _turn_dict(row)


def neighbours(memory: TurnMemory, crystal_id: str, window: int = 2) -> dict[str, Any]:
    """The turns of the same session within ``window`` turns of a turn's memory, in order."""
    from node.crystals import CrystalNotFound
    from node.memory.search import MemoryInputError

    if not 0 <= window <= MAX_WINDOW:
        raise MemoryInputError(f"window must be between 0 and {MAX_WINDOW}")
    crystal = memory.get(crystal_id)
    rows = _rows_of(memory.db, [crystal.id, crystal.memory_id])
    row = rows.get(crystal.id) or rows.get(crystal.memory_id)
    if row is None:
        raise MemoryInputError(f"{crystal_id} is not a conversation turn")
    around = memory.db.all(
        "SELECT * FROM conversation_turns WHERE namespace=? AND conversation=? AND session_index=? "
        "AND turn_index BETWEEN ? AND ? ORDER BY turn_index",
        (row["namespace"], row["conversation"], row["session_index"],
         row["turn_index"] - window, row["turn_index"] + window))
    turns: list[dict[str, Any]] = []
    for other in around:
        try:
            neighbour = memory.get(other["crystal_id"])
        except CrystalNotFound:
            continue  # deleted since, or not the caller's to see
        turns.append({"id": neighbour.id, "text": neighbour.text, "hit": other["turn_index"] == row["turn_index"]}
                     | _turn_dict(other))
    return {"id": crystal.id, "window": window, **_turn_dict(row), "turns": turns}
