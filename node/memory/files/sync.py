"""Files into memories and back in step: the one re-sync operation, on the database's thread.

The caller reads the files (``node.memory.files.folders``; the node never opens a
path a request names) and hands over :class:`Document` s (path, size, mtime,
bytes) and the paths that are gone (with why). Per batch, in three steps like
``node.memory.conversations``: :func:`plan_sync` decodes and chunks each
document and compares every chunk with its row in ``indexed_chunks`` by the
SHA-256 of its text; :func:`embed_sync` embeds only the new and changed texts
(off the single writer under trio); :func:`store_sync` decides again against
the rows as they are now and writes everything in one transaction, then
indexes the new vectors. So:

* a chunk with the same key and text keeps its crystal, id and history (its
  lines are moved if an edit above it shifted them: not a version);
* a chunk whose text changed becomes version n+1 of its memory (provenance
  ``mutated``, reason ``file_changed``), the old version closed;
* a chunk gone from its file, and every chunk of a file deleted, ignored, grown
  too big or turned binary, is tombstoned (audit ``deleted`` with the reason):
  gone from search, its history kept;
* a chunk whose memory was deleted or purged meanwhile is stored again while
  the file holds it; one an agent updated keeps the agent's version until the
  file's chunk changes.

A crystal is only ever versioned or tombstoned here if it is an indexed file's
(source ``files``) of that very path, whatever a row says. Indexing never moves
the hormones: a repository full of "error" and "failed" is not stress.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from node.crystals import (
    Crystal,
    CrystalStore,
    LifespanPolicy,
    Origin,
    Source,
    StoreError,
    VectorIndex,
    content_hash,
    now_ms,
)
from node.db import Database
from node.memory.files.documents import chunk_file, decode, memory_text
from node.memory.namespaces import validate_namespace
from node.memory.search import MemoryInputError, set_vectors
from node.memory.succession import next_version

Progress = Callable[[int, int], None]
EMBED_BATCH = 256
MAX_DOCUMENT_BYTES = 8 * 1024 * 1024  # a bound whoever sends it; the walk's own cap is smaller
MAX_PATH_CHARS = 4096
RETIRE_REASONS = frozenset({
    "deleted", "ignored", "hidden", "symlink", "oversize", "binary", "generated", "data_dir", "bad_name",
    "not_utf8", "unreadable", "over_file_limit", "missing", "not_a_file",
})


class Memory(Protocol):
    """What a re-sync needs of a node's memory (``node.memory.facade.Memory``)."""

    db: Database
    store: CrystalStore
    index: VectorIndex

    def prepare(self, text: str, **kwargs: Any) -> Crystal: ...
    def embed_windows(self, texts: Sequence[str],
                      packed: bool = False) -> tuple[np.ndarray, list[np.ndarray | None]]: ...
    def second_opinions(self, crystals: Sequence[Crystal], packed: bool = False) -> None: ...


@dataclass(frozen=True)
class Document:
    """One file as its reader saw it."""

    path: str  # absolute
    size: int
    mtime_ns: int
    content: bytes


@dataclass(frozen=True)
class FileState:
    """An indexed file as the table knows it: unchanged if size and mtime match and ``fresh``."""

    size: int
    mtime_ns: int
    fresh: bool  # every chunk's crystal is still current


def check_path(path: str) -> str:
    """An indexed file's path: absolute, bounded, printable (it is a label here, never opened)."""
    if (not isinstance(path, str) or not path.startswith("/") or len(path) > MAX_PATH_CHARS
            or any(ord(character) < 32 or ord(character) == 127 for character in path)):
        raise MemoryInputError("a file path must be absolute, at most 4096 characters, without control characters")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as error:
        raise MemoryInputError("a file path must be valid Unicode") from error
    return path


def _under(column: str, root: str) -> tuple[str, tuple[Any, ...]]:
    """SQL for "``column`` is ``root`` or below it" (a range: no LIKE escaping, uses the key)."""
    base = root.rstrip("/") or "/"
    prefix = base if base == "/" else base + "/"
    return (f"({column} = ? OR ({column} >= ? AND {column} < ?))",
            (base, prefix, prefix[:-1] + chr(ord("/") + 1)))


def known_files(memory: Memory, namespace: str | None, root: str) -> dict[str, FileState]:
    """Every file indexed under ``root`` (a folder or a file) in ``namespace``, as the table knows it."""
    space = validate_namespace(namespace)
    where, params = _under("f.path", check_path(root))
    rows = memory.db.all(
        "SELECT f.path, f.size, f.mtime_ns, f.chunks, (SELECT COUNT(*) FROM indexed_chunks c "
        "JOIN crystals k ON k.id = c.crystal_id WHERE c.namespace = f.namespace AND c.path = f.path "
        "AND k.valid_to_ms IS NULL AND k.deleted_at_ms IS NULL) AS live "
        f"FROM indexed_files f WHERE f.namespace = ? AND {where}",
        (space, *params))
    return {row["path"]: FileState(row["size"], row["mtime_ns"], row["live"] == row["chunks"]) for row in rows}


@dataclass(frozen=True)
class Item:
    """One chunk of a document: its key, memory text, hash and lines."""

    key: str
    text: str
    hash: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Read:
    """A document decoded and chunked."""

    document: Document
    items: list[Item]


@dataclass
class SyncPlan:
    namespace: str
    reads: list[Read]
    removed: dict[str, str]  # path -> why it left
    templates: dict[str, Crystal] = field(default_factory=dict)  # text hash -> crystal to embed
    skipped: Counter[str] = field(default_factory=Counter)
    replaced: int = 0  # files holding a few bytes that are not UTF-8
    long_lines: int = 0
    started: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class Row:
    key: str
    crystal_id: str
    memory_id: str
    hash: str
    start_line: int
    end_line: int
    live: bool


def _rows(memory: Memory, namespace: str, path: str) -> dict[str, Row]:
    rows = memory.db.all(
        "SELECT c.chunk_key, c.crystal_id, c.memory_id, c.hash, c.start_line, c.end_line, "
        "(k.id IS NOT NULL AND k.valid_to_ms IS NULL AND k.deleted_at_ms IS NULL) AS live "
        "FROM indexed_chunks c LEFT JOIN crystals k ON k.id = c.crystal_id "
        "WHERE c.namespace = ? AND c.path = ?", (namespace, path))
    return {row[0]: Row(row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6])) for row in rows}


def _owned(crystal: Crystal, path: str, at_ms: int) -> bool:
    return crystal.is_current(at_ms) and crystal.source is Source.FILES and crystal.path == path


def _current(memory: Memory, row: Row, path: str, at_ms: int) -> Crystal | None:
    """The current version of the row's memory, if it is still this file's chunk."""
    try:
        if row.live:
            crystal = memory.store.get(row.crystal_id)
            if _owned(crystal, path, at_ms):
                return crystal
        for crystal in reversed(memory.store.versions(row.memory_id)):
            if _owned(crystal, path, at_ms):
                return crystal
    except StoreError:  # purged, or a row that cannot be read: store the chunk afresh
        return None
    return None


KEEP, ADOPT, NEW, VERSION = "keep", "adopt", "new", "version"


def _decide(memory: Memory, row: Row | None, item: Item, path: str, at_ms: int) -> tuple[str, Crystal | None]:
    """What a chunk needs: ``keep`` (same text, current), ``adopt`` (same text, the memory moved on to
    a version an agent wrote), ``new`` or ``version`` (of the returned current crystal)."""
    if row is None:
        return NEW, None
    if row.hash == item.hash and row.live:
        return KEEP, None
    current = _current(memory, row, path, at_ms)
    if current is None:
        return NEW, None
    return (ADOPT if row.hash == item.hash else VERSION), current


def _read(document: Document, plan: SyncPlan) -> Read | None:
    path = check_path(document.path)
    if len(document.content) > MAX_DOCUMENT_BYTES:
        plan.skipped["oversize"] += 1
        plan.removed[path] = "oversize"
        return None
    decoded = decode(document.content)
    if decoded.text is None:
        plan.skipped[decoded.reason] += 1
        plan.removed[path] = decoded.reason
        return None
    plan.replaced += decoded.reason == "replaced"
    chunks, lines = chunk_file(path, decoded.text)
    plan.long_lines += lines.long_lines
    items: dict[str, Item] = {}
    for chunk in chunks:
        text = memory_text(path, chunk)
        items[chunk.key] = Item(chunk.key, text, content_hash(text), chunk.start_line, chunk.end_line)
    return Read(document, list(items.values()))


def plan_sync(memory: Memory, namespace: str | None, documents: Sequence[Document],
              removed: dict[str, str] | None = None) -> SyncPlan:
    """Decode and chunk ``documents``, and prepare a crystal for each text that needs embedding."""
    removed = dict(removed or {})
    for path, reason in removed.items():
        check_path(path)
        if reason not in RETIRE_REASONS:
            raise MemoryInputError(f"unknown reason for a removed file: {reason!r}")
    plan = SyncPlan(validate_namespace(namespace), [], removed)
    at = now_ms()
    for document in documents:
        read = _read(document, plan)
        if read is None:
            continue
        plan.reads.append(read)
        rows = _rows(memory, plan.namespace, document.path)
        for item in read.items:
            action, _ = _decide(memory, rows.get(item.key), item, document.path, at)
            if action in (NEW, VERSION) and item.hash not in plan.templates:
                plan.templates[item.hash] = _prepare(memory, plan.namespace, document.path, item)
    return plan


def _prepare(memory: Memory, namespace: str, path: str, item: Item) -> Crystal:
    # A file is a record: its chunks stay while the file holds them (they leave by re-sync, not decay).
    return memory.prepare(item.text, origin=Origin.INDEXED, source=Source.FILES, path=path,
                          start_line=item.start_line, end_line=item.end_line,
                          lifespan=LifespanPolicy.PERMANENT, namespace=namespace)


def embed_sync(memory: Memory, plan: SyncPlan, progress: Progress | None = None) -> SyncPlan:
    """The vectors (and second opinions) of the plan's new and changed texts: no database, so
    ``AsyncMemory`` runs this off the single writer."""
    crystals = list(plan.templates.values())
    for start in range(0, len(crystals), EMBED_BATCH):
        batch = crystals[start:start + EMBED_BATCH]
        vectors, windows = memory.embed_windows([crystal.text for crystal in batch], packed=True)
        for crystal, vector, split in zip(batch, vectors, windows, strict=True):
            set_vectors(crystal, vector, split)
        memory.second_opinions(batch, packed=True)
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(crystals)), len(crystals))
    return plan


def _carry(template: Crystal, crystal: Crystal) -> Crystal:
    """``crystal`` with the vectors computed for ``template`` (the same text)."""
    crystal.embedding = template.embedding
    crystal.window_embeddings = template.window_embeddings
    crystal.second_embedding = template.second_embedding
    return crystal


@dataclass
class _Written:
    counts: Counter[str] = field(default_factory=Counter)
    indexed: list[tuple[int, list[float]]] = field(default_factory=list)  # (rowid, vector) to index


def store_sync(memory: Memory, plan: SyncPlan) -> dict[str, Any]:
    """Write the plan in one transaction (deciding each chunk again against the rows as they are
    now), then index the new vectors; what happened."""
    written = _Written()
    at = now_ms()
    with memory.db.transaction() as conn:
        for read in plan.reads:
            _store_read(memory, plan, read, at, written)
        for path, reason in plan.removed.items():
            for row in _rows(memory, plan.namespace, path).values():
                _retire(memory, plan.namespace, path, row, reason, at, written)
            gone = conn.execute("DELETE FROM indexed_files WHERE namespace=? AND path=?", (plan.namespace, path))
            written.counts["files_removed"] += gone.rowcount
    if written.indexed:
        memory.index.add(np.array([rowid for rowid, _ in written.indexed], dtype=np.int64),
                         np.array([vector for _, vector in written.indexed], dtype=np.float32))
    counts = written.counts
    return {
        "namespace": plan.namespace,
        "files": {"indexed": len(plan.reads), "removed": counts["files_removed"],
                  "skipped": dict(plan.skipped), "replaced": plan.replaced},
        "chunks": {name: counts[name] for name in ("added", "versioned", "unchanged", "relocated", "retired")},
        "long_lines": plan.long_lines,
        "seconds": round(time.perf_counter() - plan.started, 3),
    }


def _store_read(memory: Memory, plan: SyncPlan, read: Read, at: int, written: _Written) -> None:
    path, space = read.document.path, plan.namespace
    rows = _rows(memory, space, path)
    complete = True
    moves: list[tuple[str, int, int]] = []
    for item in read.items:
        row = rows.get(item.key)
        action, current = _decide(memory, row, item, path, at)
        if action == KEEP and row is not None:
            written.counts["unchanged"] += 1
            if (row.start_line, row.end_line) != (item.start_line, item.end_line):
                moves.append((row.crystal_id, item.start_line, item.end_line))
                written.counts["relocated"] += 1
            crystal_id, memory_id = row.crystal_id, row.memory_id
        elif action == ADOPT and current is not None:
            written.counts["unchanged"] += 1
            crystal_id, memory_id = current.id, current.memory_id
        else:
            template = plan.templates.get(item.hash)
            if template is None or template.embedding is None:
                complete = False  # the rows moved since the plan (another sync): the next one finishes
                continue
            versioned = None
            if action == VERSION and current is not None:
                versioned = _version(memory, current, item, template)
            if versioned is not None:
                rowid, crystal_id, memory_id = versioned
                written.counts["versioned"] += 1
            else:
                result = memory.store.add_many([template])[0]
                crystal_id = result.id
                memory_id = template.memory_id if result.created else memory.store.memory_id_of(result.id)
                # Not created: the namespace already holds exactly this text (linked, not stored twice).
                written.counts["added" if result.created else "unchanged"] += 1
                rowid = result.rowid if result.created else -1
            if rowid >= 0 and template.embedding is not None:
                written.indexed.append((rowid, template.embedding))
        memory.db.execute(
            "INSERT INTO indexed_chunks(namespace, path, chunk_key, crystal_id, memory_id, hash, start_line, "
            "end_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, path, chunk_key) DO UPDATE SET "
            "crystal_id=excluded.crystal_id, memory_id=excluded.memory_id, hash=excluded.hash, "
            "start_line=excluded.start_line, end_line=excluded.end_line",
            (space, path, item.key, crystal_id, memory_id, item.hash, item.start_line, item.end_line))
    if moves:
        memory.store.set_lines(moves)
    keys = {item.key for item in read.items}
    for row in rows.values():
        if row.key not in keys:
            _retire(memory, space, path, row, "chunk_removed", at, written)
    document = read.document
    # An incomplete file keeps an impossible size, so the next sync reads it again.
    memory.db.execute(
        "INSERT INTO indexed_files(namespace, path, size, mtime_ns, chunks, indexed_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, path) DO UPDATE SET size=excluded.size, "
        "mtime_ns=excluded.mtime_ns, chunks=excluded.chunks, indexed_at_ms=excluded.indexed_at_ms",
        (space, path, document.size if complete else -1, document.mtime_ns, len(read.items), at))


def _version(memory: Memory, current: Crystal, item: Item, template: Crystal) -> tuple[int, str, str] | None:
    """Version n+1 of ``current`` with the item's text: (rowid, crystal id, memory id); None when
    the store refuses it (the namespace already holds exactly this text): the caller adds instead."""
    crystal = _carry(template, next_version(memory, current, item.text, reason="file_changed",
                                            start_line=item.start_line, end_line=item.end_line))
    try:
        rowid = memory.store.supersede(current.id, crystal)  # checks before it writes anything
    except StoreError:
        return None
    return rowid, crystal.id, crystal.memory_id


def _retire(memory: Memory, namespace: str, path: str, row: Row, reason: str, at: int,
            written: _Written) -> None:
    current = _current(memory, row, path, at)
    if current is not None:
        memory.store.tombstone(current.memory_id, at, reason=reason)
    memory.db.execute("DELETE FROM indexed_chunks WHERE namespace=? AND path=? AND chunk_key=?",
                      (namespace, path, row.key))
    written.counts["retired"] += 1


def sync_documents(memory: Memory, namespace: str | None, documents: Sequence[Document],
                   removed: dict[str, str] | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Plan, embed and store one batch (see the module docstring). ``AsyncMemory`` runs the same
    three steps with the embedding off the database's thread."""
    plan = plan_sync(memory, namespace, documents, removed)
    return store_sync(memory, embed_sync(memory, plan, progress))


def merge_summaries(summaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Batch summaries added up (counts summed, ``skipped`` by reason)."""
    total: dict[str, Any] = {"files": {"indexed": 0, "removed": 0, "skipped": Counter(), "replaced": 0},
                             "chunks": Counter(), "long_lines": 0}
    for summary in summaries:
        files = summary["files"]
        total["files"]["indexed"] += files["indexed"]
        total["files"]["removed"] += files["removed"]
        total["files"]["replaced"] += files["replaced"]
        total["files"]["skipped"].update(files["skipped"])
        total["chunks"].update(summary["chunks"])
        total["long_lines"] += summary["long_lines"]
    total["files"]["skipped"] = dict(total["files"]["skipped"])
    total["chunks"] = {name: total["chunks"][name]
                       for name in ("added", "versioned", "unchanged", "relocated", "retired")}
    return total
