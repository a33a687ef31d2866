"""Writing the portable export: the header, then one line per crystal, to a 0600 file.

Runs whole on the database's thread (``AsyncMemory.export_jsonl`` makes it one
call, so no write lands between two of its batches). Every row is read and
checked as an import would judge it first; a damaged row is left out and
counted, so the header's count is what the file holds.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from node.crystals import COLUMNS, COLUMNS_WITHOUT_EMBEDDING, now_ms, row_to_crystal
from node.memory.portable.lines import (
    BATCH,
    FORMAT,
    SIDE_TABLES,
    VERSION,
    BadLine,
    Progress,
    check_crystal,
)

if TYPE_CHECKING:
    from node.memory.facade import Memory

log = logging.getLogger(__name__)
LEFT_OUT = ("deleted memories (tombstones), memories whose every version expired or was archived, "
            "rows stored damaged")
_EXPORTED = (
    "c.deleted_at_ms IS NULL AND c.memory_id IN (SELECT memory_id FROM crystals WHERE valid_to_ms IS NULL "
    "AND deleted_at_ms IS NULL AND (expires_at_ms IS NULL OR expires_at_ms > ?) "
    "AND lifecycle NOT IN ('expired', 'archived'))"
)


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _rows_by(db: Any, sql: str, key: str, ids: Sequence[Any]) -> dict[Any, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {row[key]: dict(row) for row in db.all(sql.format(marks=marks), tuple(ids))}


def _grouped(db: Any, sql: str, key: str, ids: Sequence[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Like :func:`_rows_by`, for a table that holds several rows per crystal."""
    if not ids:
        return {}
    grouped: dict[Any, list[dict[str, Any]]] = {}
    for row in db.all(sql.format(marks=",".join("?" * len(ids))), tuple(ids)):
        grouped.setdefault(row[key], []).append(dict(row))
    return grouped


def _exportable(memory: Memory, at_ms: int) -> tuple[list[int], Counter[str], int]:
    """Rowids of the crystals to export, in order, each one read and checked as an import would;
    counts by namespace / source / kind; how many rows were left out as damaged."""
    rowids: list[int] = []
    counts: Counter[str] = Counter()
    damaged = 0
    last = 0
    while True:
        rows = memory.db.all(
            f"SELECT c.rowid AS rid, {COLUMNS_WITHOUT_EMBEDDING} FROM crystals c "
            f"WHERE {_EXPORTED} AND c.rowid > ? ORDER BY c.rowid LIMIT ?", (at_ms, last, 4 * BATCH))
        if not rows:
            break
        for row in rows:
            last = int(row["rid"])
            try:
                crystal = row_to_crystal(row)
                check_crystal(crystal)
            except (ValueError, KeyError, TypeError, BadLine) as error:
                damaged += 1
                log.warning("export_row_left_out id=%s error=%s", row["id"], error)
                continue
            rowids.append(last)
            counts["crystals"] += 1
            counts[f"namespace:{crystal.namespace}"] += 1
            counts[f"source:{crystal.source.value}"] += 1
            if crystal.is_current(at_ms):
                counts["current"] += 1
    return rowids, counts, damaged


def export_lines(memory: Memory, progress: Progress | None = None) -> Iterator[str]:
    """The export file's lines (each without its newline): the header, then one per crystal.

    Read in batches of ``BATCH`` rows; run it whole on the database's thread (the node runs it
    in one call, so no write lands between two batches).
    """
    at = now_ms()
    rowids, counts, damaged = _exportable(memory, at)
    second = memory.second
    by_namespace = {key.split(":", 1)[1]: n for key, n in counts.items() if key.startswith("namespace:")}
    by_source = {key.split(":", 1)[1]: n for key, n in counts.items() if key.startswith("source:")}
    header = {
        "format": FORMAT, "version": VERSION, "embedder": memory.embedder.name, "dim": memory.embedder.dim,
        "second_opinion": {"encoder": second.name, "dim": second.dim} if second is not None else None,
        "exported_at": at,
        "counts": {"crystals": counts["crystals"], "current": counts["current"],
                   "by_namespace": by_namespace, "by_source": by_source},
        "hormones": {key: value for key, value in memory.hormones.to_dict().items() if key != "overrides"},
        "left_out": LEFT_OUT, "damaged_left_out": damaged,
    }
    yield json.dumps(header, separators=(",", ":"))
    total = len(rowids)
    for start in range(0, total, BATCH):
        chunk = rowids[start:start + BATCH]
        marks = ",".join("?" * len(chunk))
        rows = memory.db.all(f"SELECT rowid AS rid, {COLUMNS} FROM crystals WHERE rowid IN ({marks}) "
                             "ORDER BY rowid", tuple(chunk))
        ids = [row["id"] for row in rows]
        windows = _rows_by(memory.db, "SELECT crystal_rowid, embedder, vectors FROM crystal_windows "
                           "WHERE crystal_rowid IN ({marks})", "crystal_rowid", chunk)
        seconds = _rows_by(memory.db, "SELECT crystal_rowid, encoder, vector FROM crystal_second "
                           "WHERE crystal_rowid IN ({marks})", "crystal_rowid", chunk)
        turns = _rows_by(memory.db, "SELECT * FROM conversation_turns WHERE crystal_id IN ({marks})",
                         "crystal_id", ids)
        knowledge = _rows_by(memory.db, "SELECT * FROM knowledge WHERE crystal_id IN ({marks})", "crystal_id", ids)
        energy = _rows_by(memory.db, "SELECT * FROM memory_energy WHERE crystal_id IN ({marks})", "crystal_id", ids)
        facts = _rows_by(memory.db, "SELECT * FROM knowledge_sources WHERE episode_id IN ({marks})",
                         "episode_id", ids)
        side = {key: _grouped(memory.db, f"SELECT * FROM {table} WHERE {column} IN ({{marks}})", column, ids)
                for key, (table, column, _) in SIDE_TABLES.items()}
        chunks = _rows_by(memory.db, "SELECT c.*, f.size AS file_size, f.mtime_ns AS file_mtime_ns, "
                          "f.chunks AS file_chunks, f.indexed_at_ms AS file_indexed_at_ms FROM indexed_chunks c "
                          "LEFT JOIN indexed_files f ON f.namespace = c.namespace AND f.path = c.path "
                          "WHERE c.crystal_id IN ({marks})", "crystal_id", ids)
        for row in rows:
            rowid, crystal_id = int(row["rid"]), row["id"]
            record: dict[str, Any] = {"crystal": row_to_crystal(row).to_dict(), "vector": _b64(row["embedding"])}
            window = windows.get(rowid)
            if window is not None and window["embedder"] == memory.embedder.name:
                record["windows"] = _b64(window["vectors"])
            opinion = seconds.get(rowid)
            if opinion is not None:
                record["second"] = {"encoder": opinion["encoder"], "vector": _b64(opinion["vector"])}
            if crystal_id in turns:
                record["turn"] = {key: value for key, value in turns[crystal_id].items()
                                  if key not in ("crystal_id", "namespace")}
            if crystal_id in knowledge:
                record["knowledge"] = {key: value for key, value in knowledge[crystal_id].items()
                                       if key != "crystal_id"}
            if crystal_id in energy:
                record["energy"] = {key: value for key, value in energy[crystal_id].items() if key != "crystal_id"}
            if crystal_id in facts:
                record["fact"] = {"fact_id": facts[crystal_id]["fact_id"],
                                  "added_at_ms": facts[crystal_id]["added_at_ms"]}
            if crystal_id in chunks:
                record["chunk"] = _chunk(chunks[crystal_id])
            for key, (_, column, many) in SIDE_TABLES.items():
                found = [{name: value for name, value in row.items() if name != column}
                         for row in side[key].get(crystal_id, [])]
                if found:
                    record[key] = found if many else found[0]
            yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if progress is not None:
            progress(min(start + BATCH, total), total)


def _chunk(row: dict[str, Any]) -> dict[str, Any]:
    """An indexed file's chunk row and its file's row (node.memory.files), so a re-sync after a
    restore compares instead of adding every chunk again."""
    chunk = {key: row[key] for key in ("path", "chunk_key", "memory_id", "hash", "start_line", "end_line")}
    if row["file_size"] is not None:
        chunk["file"] = {"size": row["file_size"], "mtime_ns": row["file_mtime_ns"], "chunks": row["file_chunks"],
                         "indexed_at_ms": row["file_indexed_at_ms"]}
    return chunk


def export_jsonl(memory: Memory, out_file: IO[bytes], progress: Progress | None = None) -> dict[str, Any]:
    """Write the export to ``out_file`` (binary), line by line; a summary of what was written."""
    written = crystals = 0
    header: dict[str, Any] = {}
    for number, line in enumerate(export_lines(memory, progress)):
        data = line.encode("utf-8") + b"\n"
        out_file.write(data)
        written += len(data)
        if number == 0:
            header = json.loads(line)
        else:
            crystals += 1
    return {"format": FORMAT, "version": VERSION, "crystals": crystals, "current": header["counts"]["current"],
            "by_namespace": header["counts"]["by_namespace"], "by_source": header["counts"]["by_source"],
            "embedder": header["embedder"], "dim": header["dim"], "bytes": written,
            "left_out": LEFT_OUT, "damaged_left_out": header["damaged_left_out"]}


def open_private(path: Path) -> tuple[IO[bytes], Path]:
    """A new file beside ``path`` that only the owner can read (0600, never a symlink followed),
    to be renamed onto ``path`` when complete (:func:`finish_private`): a half-written export never
    takes the place of a good one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)  # whatever the umask
    return os.fdopen(descriptor, "wb"), temporary


def finish_private(handle: IO[bytes], temporary: Path, path: Path, complete: bool) -> None:
    """Close ``handle``; rename it onto ``path`` if ``complete``, else remove it."""
    try:
        if complete:
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        handle.close()
    if complete:
        os.replace(temporary, path)
    else:
        temporary.unlink(missing_ok=True)


def export_to_path(memory: Memory, path: str | Path, progress: Progress | None = None) -> dict[str, Any]:
    """:func:`export_jsonl` into a new 0600 file at ``path`` (replacing it only when complete)."""
    target = Path(path)
    handle, temporary = open_private(target)
    complete = False
    try:
        summary = export_jsonl(memory, handle, progress)
        complete = True
    finally:
        finish_private(handle, temporary, target, complete)
    return summary | {"path": str(target)}
