"""Restoring a portable export: the whole file judged, then written in one transaction and indexed.

See the package docstring for the rules (all or nothing; the file's vectors
when its embedder is the node's; memories already here left as they are).
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from node.memory.portable.lines import (
    BATCH,
    FORMAT,
    MAX_LINE_BYTES,
    SIDE_TABLES,
    BadLine,
    Header,
    ImportRefused,
    NodeColumns,
    Progress,
    Record,
    TurnColumns,
    is_int,
    is_real,
    read_header,
    read_lines,
    read_record,
)
from node.memory.search import set_vectors

if TYPE_CHECKING:
    from node.memory.facade import Memory

log = logging.getLogger(__name__)
ERROR_EXAMPLES = 5


@dataclass
class _Judged:
    """What the judging pass keeps of a sound file: enough to decide what to skip, no crystal."""

    header: Header
    ids: dict[str, str] = field(default_factory=dict)  # crystal id -> memory id
    memories: dict[str, list[str]] = field(default_factory=dict)  # memory id -> crystal ids
    current_texts: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, hash) -> memory id


def _columns(memory: Memory, table: str, own: set[str]) -> TurnColumns:
    # ``table`` is one of this module's names, never the file's.
    rows = memory.db.all(f"PRAGMA table_info({table})")
    return TurnColumns(frozenset(row[1] for row in rows) - own,
                       frozenset(row[1] for row in rows if row[3] and row[4] is None) - own)


def turn_columns(memory: Memory) -> NodeColumns:
    """This node's columns of ``conversation_turns`` and of the side tables (a newer schema may add
    some; a row's other keys are dropped, so no name from the file ever reaches SQL). The crystal's
    id and namespace come from the restored crystal itself."""
    return NodeColumns(_columns(memory, "conversation_turns", {"crystal_id", "namespace"}),
                       {key: _columns(memory, table, {column})
                        for key, (table, column, _) in SIDE_TABLES.items()})


def judge(memory: Memory, file: IO[bytes]) -> _Judged:
    """Read the whole file once and judge every line; :class:`ImportRefused` with a count of the
    errors by kind if any line is not sound (nothing written)."""
    lines = read_lines(file)
    first = next(lines, None)
    if first is None or first[1] is None:
        raise ImportRefused("the file is empty or its header line is too long")
    judged = _Judged(read_header(first[1]))
    columns = turn_columns(memory)
    errors: Counter[str] = Counter()
    examples: list[str] = []

    def bad(number: int, kind: str, detail: str) -> None:
        errors[kind] += 1
        if len(examples) < ERROR_EXAMPLES:
            examples.append(f"line {number}: {detail}")

    count = 0
    for number, line in lines:
        count += 1
        if line is None:
            bad(number, "too_long", f"longer than {MAX_LINE_BYTES} bytes")
            continue
        try:
            crystal = read_record(line, judged.header, columns).crystal
        except BadLine as error:
            bad(number, error.kind, str(error))
            continue
        if crystal.id in judged.ids:
            bad(number, "duplicate_id", f"{crystal.id} appears twice")
            continue
        judged.ids[crystal.id] = crystal.memory_id
        judged.memories.setdefault(crystal.memory_id, []).append(crystal.id)
        if crystal.valid_to_ms is None:
            key = (crystal.namespace, crystal.hash)
            if key in judged.current_texts:
                bad(number, "duplicate_text", f"{crystal.id}: a second current copy of one text in {crystal.namespace}")
            judged.current_texts[key] = crystal.memory_id
    if not errors and count != judged.header.crystals:
        bad(0, "count", f"the header announces {judged.header.crystals} crystals, the file holds {count}"
                        " (cut short?)")
    if errors:
        raise ImportRefused("export file refused, nothing imported", dict(errors), examples)
    return judged


def _skipped(memory: Memory, judged: _Judged) -> tuple[set[str], int, int]:
    """Memories to leave out: (memory ids, how many are already here whole, how many conflict)."""
    present: set[str] = set()
    ids = list(judged.ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        present |= {row[0] for row in memory.db.all(
            f"SELECT id FROM crystals WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk))}
    skip: set[str] = set()
    already = conflicts = 0
    for memory_id, members in judged.memories.items():
        here = sum(1 for crystal_id in members if crystal_id in present)
        if here == len(members):
            already += 1
            skip.add(memory_id)
        elif here:
            conflicts += 1
            skip.add(memory_id)
    taken = [(key, memory_id) for key, memory_id in judged.current_texts.items() if memory_id not in skip]
    for start in range(0, len(taken), 200):
        pairs = taken[start:start + 200]
        clause = " OR ".join("(namespace=? AND hash=?)" for _ in pairs)
        params = [value for (namespace, text_hash), _ in pairs for value in (namespace, text_hash)]
        held = {(row[0], row[1]) for row in memory.db.all(
            f"SELECT namespace, hash FROM crystals WHERE valid_to_ms IS NULL AND deleted_at_ms IS NULL "
            f"AND ({clause})", params)}
        for key, memory_id in pairs:
            if key in held and memory_id not in skip:
                conflicts += 1
                skip.add(memory_id)
    return skip, already, conflicts


def _write_rows(conn: sqlite3.Connection, record: Record) -> None:
    """The rows beside a restored crystal: its turn, confidence, energy and fact link."""
    crystal = record.crystal
    if record.turn is not None:
        turn = record.turn | {"namespace": crystal.namespace, "crystal_id": crystal.id}
        names = sorted(turn)  # the node's own column names (judged against PRAGMA table_info)
        conn.execute(f"INSERT OR IGNORE INTO conversation_turns({', '.join(names)}) "
                     f"VALUES ({','.join('?' * len(names))})", [turn[name] for name in names])
    if record.knowledge is not None:
        row = record.knowledge
        conn.execute("INSERT OR IGNORE INTO knowledge(crystal_id, confidence, reference_ms, episode_count, "
                     "generation, provenance, signer, namespace) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (crystal.id, float(row["confidence"]), row["reference_ms"], row["episode_count"],
                      row["generation"], row["provenance"], row.get("signer"), row.get("namespace", "")))
    if record.energy is not None:
        row = record.energy
        conn.execute("INSERT OR IGNORE INTO memory_energy(crystal_id, tier, energy, at_ms, access_count) "
                     "VALUES (?, ?, ?, ?, ?)",
                     (crystal.id, row["tier"], float(row["energy"]), row["at_ms"], row["access_count"]))
    if record.fact is not None:
        conn.execute("INSERT OR IGNORE INTO knowledge_sources(episode_id, fact_id, added_at_ms) VALUES (?, ?, ?)",
                     (crystal.id, record.fact["fact_id"], record.fact["added_at_ms"]))
    for key, rows in record.side.items():
        table, column, _ = SIDE_TABLES[key]
        for row in rows:
            values = row | {column: crystal.id}
            names = sorted(values)
            conn.execute(f"INSERT OR IGNORE INTO {table}({', '.join(names)}) VALUES ({','.join('?' * len(names))})",
                         [values[name] for name in names])
    if record.chunk is not None:
        chunk = record.chunk
        conn.execute("INSERT OR IGNORE INTO indexed_chunks(namespace, path, chunk_key, crystal_id, memory_id, hash, "
                     "start_line, end_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (crystal.namespace, chunk["path"], chunk["chunk_key"], crystal.id, chunk["memory_id"],
                      chunk["hash"], chunk["start_line"], chunk["end_line"]))
        file = chunk.get("file")
        if file is not None:
            conn.execute("INSERT OR IGNORE INTO indexed_files(namespace, path, size, mtime_ns, chunks, indexed_at_ms) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (crystal.namespace, chunk["path"], file["size"],
                                                       file["mtime_ns"], file["chunks"], file["indexed_at_ms"]))


def _vectors(memory: Memory, records: list[Record], own_vectors: bool) -> int:
    """Give each record's crystal the vectors to store; how many texts were embedded here."""
    embed = [record for record in records if not own_vectors or record.vector is None]
    if embed:
        vectors, windows = memory.embed_windows([record.crystal.text for record in embed], packed=True)
        for record, vector, split in zip(embed, vectors, windows, strict=True):
            set_vectors(record.crystal, vector, split)
    for record in records:
        if own_vectors and record.vector is not None:
            set_vectors(record.crystal, record.vector, record.windows)
        second = memory.second
        if record.second is not None and second is not None and own_vectors and record.second[0] == second.name \
                and len(record.second[1]) == second.dim:
            record.crystal.second_embedding = (second.name, record.second[1].tolist())
    memory.second_opinions([record.crystal for record in records], packed=True)
    return len(embed)


def import_jsonl(memory: Memory, file: IO[bytes], progress: Progress | None = None) -> dict[str, Any]:
    """Restore an export (``file``: binary, seekable) into ``memory``: judged whole, then written in
    one transaction and indexed (see the module docstring); a summary of what happened."""
    judged = judge(memory, file)
    header = judged.header
    own_vectors = header.embedder == memory.embedder.name and header.dim == memory.embedder.dim
    skip, already, conflicts = _skipped(memory, judged)
    fresh = memory.store.stats()["total"] == 0
    before = memory.store.vector_stats()[1]
    columns = turn_columns(memory)
    total = header.crystals
    file.seek(0)
    lines = read_lines(file)
    next(lines)  # the header, judged above
    try:
        imported, embedded = _write(memory, lines, header, columns, skip, own_vectors, progress)
    except sqlite3.IntegrityError as error:  # a write raced the judgement (the node is meant to be stopped)
        raise ImportRefused(f"the file conflicts with this node's memory ({error}); nothing imported") from error
    for rowids, vectors in memory.store.vectors(after_rowid=before):
        memory.index.add(rowids, vectors)
    memory.index.save()
    if fresh and imported and header.hormones is not None:
        _restore_hormones(memory, header.hormones)
    if progress is not None:
        progress(total, total)
    log.info("memory_imported crystals=%d already=%d conflicts=%d embedded=%d", imported, already, conflicts,
             embedded)
    return {"format": FORMAT, "crystals": total, "imported": imported, "memories": len(judged.memories),
            "already_stored": already, "conflicts": conflicts, "embedder": header.embedder,
            "vectors": "file" if own_vectors else f"re-embedded with {memory.embedder.name}",
            "embedded": embedded}


def _write(memory: Memory, lines: Iterator[tuple[int, bytes | None]], header: Header, columns: NodeColumns,
           skip: set[str], own_vectors: bool, progress: Progress | None) -> tuple[int, int]:
    """The judged file's memories (less ``skip``) in one transaction: (crystals, texts embedded)."""
    imported = embedded = done = 0
    with memory.db.transaction() as conn:
        batch: list[Record] = []

        def flush() -> None:
            nonlocal imported, embedded
            if not batch:
                return
            embedded += _vectors(memory, batch, own_vectors)
            memory.store.restore_many([record.crystal for record in batch])
            for record in batch:
                _write_rows(conn, record)
            imported += len(batch)
            batch.clear()

        for _, line in lines:
            done += 1
            if line is None:  # the file changed since it was judged: the transaction is undone
                raise ImportRefused("the file changed while it was imported; nothing imported")
            try:
                record = read_record(line, header, columns)
            except BadLine as error:
                raise ImportRefused(f"the file changed while it was imported ({error}); nothing imported") \
                    from error
            if record.crystal.memory_id in skip:
                continue
            batch.append(record)
            if len(batch) >= BATCH:
                flush()
                if progress is not None:
                    progress(done, header.crystals)
        flush()
    return imported, embedded


def _restore_hormones(memory: Memory, saved: dict[str, Any]) -> None:
    levels = saved.get("levels")
    updated = saved.get("updatedAtMs")
    if isinstance(levels, dict) and isinstance(updated, int) and is_int(updated, 0) and all(
            isinstance(key, str) and is_real(value) for key, value in levels.items()):
        memory.hormones.restore_levels({key: float(value) for key, value in levels.items()}, int(updated))
        memory.save_hormones()


def import_path(memory: Memory, path: str | Path, progress: Progress | None = None) -> dict[str, Any]:
    """:func:`import_jsonl` of the file at ``path``."""
    try:
        with open(path, "rb") as handle:
            return import_jsonl(memory, handle, progress) | {"path": str(path)}
    except OSError as error:
        raise ImportRefused(f"cannot read {path}: {error.strerror}") from error
