"""Memory as a portable JSONL file: every current memory with its versions, out and back in.

``crystalmesh memory export --format jsonl FILE`` / ``memory import FILE``
(docs/memory.md, "Export and import"). The file is one JSON object per line:

* a header: ``{"format": "crystalmesh-memory", "version": 1, "embedder", "dim",
  "second_opinion", "exported_at", "counts", "hormones", "left_out"}``;
* one line per crystal, oldest row first: ``{"crystal": Crystal.to_dict(), "vector": base64
  float32 | null, "windows", "second", "turn", "knowledge", "energy", "fact"}``, the last five
  only where the store has them (a long text's window vectors, the second encoder's vector,
  the conversation or transcript turn it was, its confidence row, its energy tier, the fact
  it is evidence for), so origins, confidence and tiers survive the trip.

What goes out: every memory with a current version (not deleted, superseded, expired or
archived), with all of its versions (superseded ones keep ``validTo`` / ``supersededBy``).
Left out, and said so in the header: deleted memories (tombstones), memories whose every
version expired or was archived (merged away), and rows stored damaged. Private and
confidential memories are included: the file is the node's own user's, written 0600.

What comes in (:func:`import_jsonl`), all or nothing: the whole file is judged first, every
line as hostile input (at most ``MAX_LINE_BYTES``, nesting checked with
``protocol.codec.json_too_deep`` before ``json.loads``, valid UTF-8 without lone
surrogates, the crystal through ``Crystal.from_dict`` and a check of every column it would
write, the hash recomputed, vectors of the right size, finite and unit length, ids unique,
the count the header announced). One bad line refuses the file with a count of the errors
by kind, and nothing is written. A sound file is then written in one transaction (same ids,
versions, validity, namespaces, provenance, governance, skill fields, counts) and indexed
after the commit. Vectors are the file's when its embedder (name and dimension) is the
node's, else every text is embedded again. A memory already in the node (any version's id)
is left as it is: importing a file twice adds nothing; a memory only partly there, or
whose current text the namespace already holds under another id, is skipped and counted
(``conflicts``), never merged.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from node.crystals import (
    COLUMNS,
    COLUMNS_WITHOUT_EMBEDDING,
    Crystal,
    content_hash,
    crystal_values,
    now_ms,
    row_to_crystal,
)
from node.memory.namespaces import InvalidNamespace, validate_namespace
from node.memory.search import MemoryInputError, set_vectors
from protocol.codec import json_too_deep

if TYPE_CHECKING:
    from node.memory.facade import Memory

log = logging.getLogger(__name__)

FORMAT = "crystalmesh-memory"
VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024  # a 64 KiB text escaped, its window vectors and rows fit many times
MAX_DEPTH = 16  # a record nests 5 deep (crystal > provenanceDag > node > metadata > value)
MAX_WINDOWS = 512
MAX_PROVENANCE_NODES = 1024
MAX_ID_CHARS = 128
BATCH = 256
ERROR_EXAMPLES = 5
INT64 = (-(2**63), 2**63 - 1)
LEFT_OUT = ("deleted memories (tombstones), memories whose every version expired or was archived, "
            "rows stored damaged")
TIERS = frozenset({"working", "short_term", "long_term"})
KNOWLEDGE_PROVENANCE = frozenset({"local", "consolidated", "imported", "bought"})

Progress = Callable[[int, int], None]

# What each column of the crystals row may hold (node.crystals.rows.crystal_values order is not
# relied on: the names are). "int" columns take int only, "real" int or float, "text" str.
_COLUMN_KIND = {
    "start_line": "int", "end_line": "int", "access_count": "int", "last_accessed_at_ms": "int",
    "created_at_ms": "int", "skill_version": "int", "deprecated": "int", "is_verified": "int",
    "executions": "int", "successes": "int", "version": "int", "valid_from_ms": "int",
    "valid_to_ms": "int", "deleted_at_ms": "int", "expires_at_ms": "int",
    "importance_score": "real", "emotional_valence": "real", "steering_reward": "real", "reward_sum": "real",
}
_NULLABLE = frozenset({
    "embedding", "path", "start_line", "end_line", "last_accessed_at_ms", "emotional_valence",
    "hormonal_json", "parent_id", "stable_skill_id", "previous_version_id", "deprecated_by",
    "skill_category", "verified_by", "valid_to_ms", "superseded_by", "deleted_at_ms", "expires_at_ms",
})
_EXPORTED = (
    "c.deleted_at_ms IS NULL AND c.memory_id IN (SELECT memory_id FROM crystals WHERE valid_to_ms IS NULL "
    "AND deleted_at_ms IS NULL AND (expires_at_ms IS NULL OR expires_at_ms > ?) "
    "AND lifecycle NOT IN ('expired', 'archived'))"
)


class ImportRefused(MemoryInputError):
    """An export file was refused whole; nothing was written."""

    code = "import_refused"

    def __init__(self, message: str, errors: dict[str, int] | None = None,
                 examples: Sequence[str] = ()) -> None:
        detail = ""
        if errors:
            detail = " (" + ", ".join(f"{kind} {count}" for kind, count in sorted(errors.items())) + ")"
        if examples:
            detail += ": " + "; ".join(examples)
        super().__init__(message + detail)
        self.errors = dict(errors or {})
        self.examples = list(examples)


class _BadLine(ValueError):
    """One line of an export file is not sound; ``kind`` counts it."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(detail or kind)
        self.kind = kind


# --- export ----------------------------------------------------------------------------------------
def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _rows_by(db: Any, sql: str, key: str, ids: Sequence[Any]) -> dict[Any, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {row[key]: dict(row) for row in db.all(sql.format(marks=marks), tuple(ids))}


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
            except (ValueError, KeyError, TypeError, _BadLine) as error:
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
            yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if progress is not None:
            progress(min(start + BATCH, total), total)


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


# --- reading a line as hostile input --------------------------------------------------------------
def is_export(first_line: bytes) -> bool:
    """Whether a file whose first line is ``first_line`` is an export (else: plain text lines)."""
    stripped = first_line.strip()
    if not stripped.startswith(b"{") or len(stripped) > MAX_LINE_BYTES or json_too_deep(stripped, MAX_DEPTH):
        return False
    try:
        header = json.loads(stripped)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT


def _json_line(line: bytes) -> Any:
    if len(line) > MAX_LINE_BYTES:
        raise _BadLine("too_long", f"longer than {MAX_LINE_BYTES} bytes")
    if json_too_deep(line, MAX_DEPTH):
        raise _BadLine("too_deep", f"nested deeper than {MAX_DEPTH}")
    try:
        value = json.loads(line)
        # Lone surrogates (``"\ud800"``) parse but cannot be stored: refuse them here.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError) as error:
        raise _BadLine("not_json", str(error)[:80]) from error
    return value


def _int(value: Any, low: int = INT64[0], high: int = INT64[1]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _real(value: Any) -> bool:
    return (isinstance(value, float) and math.isfinite(value)) or _int(value)


def _short_text(value: Any, limit: int = MAX_ID_CHARS) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and value.isprintable()


def check_crystal(crystal: Crystal) -> None:
    """Everything a restored crystal writes is of its column's kind, and it is one we export."""
    if not _short_text(crystal.id) or not _short_text(crystal.memory_id):
        raise _BadLine("bad_crystal", "id and memoryId must be short printable strings")
    if not crystal.text.strip():
        raise _BadLine("bad_crystal", "empty text")
    if crystal.hash != content_hash(crystal.text):
        raise _BadLine("bad_hash", f"{crystal.id}: hash is not the text's sha256")
    try:
        validate_namespace(crystal.namespace)
    except InvalidNamespace as error:
        raise _BadLine("bad_crystal", str(error)) from error
    if crystal.deleted_at_ms is not None:
        raise _BadLine("bad_crystal", f"{crystal.id} is deleted (exports hold no tombstones)")
    governance = crystal.governance
    if governance.ttl_ms is not None and not _int(governance.ttl_ms, 1):
        raise _BadLine("bad_crystal", "ttlMs must be a positive integer")
    if not all(isinstance(actor, str) for actor in governance.provenance_chain) or not (
            governance.peer_origin is None or isinstance(governance.peer_origin, str)) or not _real(
            governance.priority):
        raise _BadLine("bad_crystal", "governance has a field of the wrong kind")
    if len(crystal.provenance_dag) > MAX_PROVENANCE_NODES or not all(
            isinstance(tag, str) for tag in crystal.skill_tags):
        raise _BadLine("bad_crystal", "provenance or skill tags of the wrong shape")
    influence = crystal.hormonal_influence
    if influence is not None and not all(_real(value) for value in vars(influence).values()):
        raise _BadLine("bad_crystal", "hormonalInfluence must hold finite numbers")
    try:
        values = crystal_values(crystal)
    except (TypeError, ValueError, OverflowError) as error:
        raise _BadLine("bad_crystal", str(error)[:80]) from error
    for name, value in zip(COLUMNS.split(", "), values, strict=True):
        if value is None:
            if name not in _NULLABLE:
                raise _BadLine("bad_crystal", f"{name} is missing")
            continue
        kind = _COLUMN_KIND.get(name, "blob" if name == "embedding" else "text")
        if (kind == "int" and not _int(value)) or (kind == "real" and not _real(value)) or (
                kind == "text" and not isinstance(value, str)):
            raise _BadLine("bad_crystal", f"{name} is not {'an integer' if kind == 'int' else 'a ' + kind}")


def _vector(value: Any, dim: int, kind: str, rows: int = 1) -> np.ndarray | None:
    """``value`` (base64 float32) as a ``rows × dim`` array of finite unit vectors; None stays None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadLine(kind, "not a base64 string")
    try:
        blob = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise _BadLine(kind, "not base64") from error
    if dim <= 0 or len(blob) % (dim * 4) or not 1 <= len(blob) // (dim * 4) <= rows:
        raise _BadLine(kind, f"not {'one' if rows == 1 else 'whole'} {dim}-d float32 vector(s)")
    vectors = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
    if not np.all(np.isfinite(vectors)) or np.any(np.abs(np.linalg.norm(vectors, axis=1) - 1.0) > 1e-3):
        raise _BadLine(kind, "not finite unit vectors")
    return vectors


@dataclass
class Header:
    embedder: str
    dim: int
    second: tuple[str, int] | None
    crystals: int
    hormones: dict[str, Any] | None


def read_header(line: bytes) -> Header:
    """The header line, judged (an unknown format or version is refused)."""
    try:
        data = _json_line(line)
    except _BadLine as error:
        raise ImportRefused(f"the header line is not sound: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ImportRefused(f"not a {FORMAT} export (its first line is no header)")
    if data.get("version") != VERSION:
        raise ImportRefused(f"export version {str(data.get('version'))[:20]!r} is not one this node reads "
                            f"(it reads version {VERSION}); import it with the crystalmesh that wrote it")
    embedder, dim, counts = data.get("embedder"), data.get("dim"), data.get("counts")
    second = data.get("second_opinion")
    if not _short_text(embedder, 64) or not _int(dim, 1, 8192) or not isinstance(counts, dict) or not _int(
            counts.get("crystals"), 0):
        raise ImportRefused("the header's embedder, dim or counts are missing or of the wrong kind")
    second_pair = None
    if isinstance(second, dict) and _short_text(second.get("encoder"), 64) and _int(second.get("dim"), 1, 8192):
        second_pair = (str(second["encoder"]), int(second["dim"] or 0))
    hormones = data.get("hormones")
    return Header(str(embedder), int(dim or 0), second_pair, int(counts["crystals"]),
                  hormones if isinstance(hormones, dict) else None)


@dataclass
class Record:
    """One crystal line, judged."""

    crystal: Crystal
    vector: np.ndarray | None
    windows: np.ndarray | None
    second: tuple[str, np.ndarray] | None
    turn: dict[str, Any] | None
    knowledge: dict[str, Any] | None
    energy: dict[str, Any] | None
    fact: dict[str, Any] | None


def _scalars(value: Any, kind: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
            isinstance(key, str) and (item is None or isinstance(item, str) or _real(item))
            for key, item in value.items()):
        raise _BadLine(kind, "not an object of plain values")
    return value


def read_record(line: bytes, header: Header, turn_columns: TurnColumns) -> Record:
    """One crystal line, judged completely (raises :class:`_BadLine`)."""
    data = _json_line(line)
    if not isinstance(data, dict) or not isinstance(data.get("crystal"), dict):
        raise _BadLine("bad_crystal", "no crystal object")
    fields = {key: value for key, value in data["crystal"].items() if key != "embedding"}
    try:
        crystal = Crystal.from_dict(fields)
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as error:
        raise _BadLine("bad_crystal", f"{type(error).__name__}: {str(error)[:60]}") from error
    check_crystal(crystal)
    vector = _vector(data.get("vector"), header.dim, "bad_vector")
    windows = _vector(data.get("windows"), header.dim, "bad_windows", MAX_WINDOWS)
    second = None
    if data.get("second") is not None:
        opinion = data["second"]
        if not isinstance(opinion, dict) or not _short_text(opinion.get("encoder"), 64):
            raise _BadLine("bad_second", "no encoder")
        if header.second is not None and opinion["encoder"] == header.second[0]:
            found = _vector(opinion.get("vector"), header.second[1], "bad_second")
            second = None if found is None else (header.second[0], found[0])
    turn = _scalars(data.get("turn"), "bad_turn")
    if turn is not None:
        for key in ("conversation", "source_id", "speaker", "session"):
            if not isinstance(turn.get(key), str):
                raise _BadLine("bad_turn", f"{key} must be a string")
        for key in ("session_index", "turn_index"):
            if not _int(turn.get(key)):
                raise _BadLine("bad_turn", f"{key} must be an integer")
        missing = sorted(turn_columns.required - {key for key, value in turn.items() if value is not None})
        if missing:
            raise _BadLine("bad_turn", f"no {', '.join(missing)}")
        turn = {key: value for key, value in turn.items() if key in turn_columns.names}
    knowledge = _scalars(data.get("knowledge"), "bad_knowledge")
    if knowledge is not None and not (
            _real(knowledge.get("confidence")) and 0.0 <= float(knowledge["confidence"]) <= 1.0
            and _int(knowledge.get("reference_ms")) and _int(knowledge.get("episode_count"), 0)
            and _int(knowledge.get("generation"), 0) and knowledge.get("provenance") in KNOWLEDGE_PROVENANCE
            and isinstance(knowledge.get("namespace", ""), str)
            and (knowledge.get("signer") is None or isinstance(knowledge.get("signer"), str))):
        raise _BadLine("bad_knowledge", "confidence row of the wrong shape")
    energy = _scalars(data.get("energy"), "bad_energy")
    if energy is not None and not (energy.get("tier") in TIERS and _real(energy.get("energy"))
                                   and _int(energy.get("at_ms")) and _int(energy.get("access_count"), 0)):
        raise _BadLine("bad_energy", "energy row of the wrong shape")
    fact = _scalars(data.get("fact"), "bad_fact")
    if fact is not None and not (_short_text(fact.get("fact_id")) and _int(fact.get("added_at_ms"))):
        raise _BadLine("bad_fact", "fact link of the wrong shape")
    return Record(crystal, None if vector is None else vector[0], windows, second, turn, knowledge, energy, fact)


def _lines(file: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` of ``file``; a line over ``MAX_LINE_BYTES`` is read past, never held
    whole, and given as None."""
    number = 0
    while True:
        line = file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := file.readline(1024 * 1024)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        if line.strip():
            yield number, line.strip()


# --- import ---------------------------------------------------------------------------------------
@dataclass
class _Judged:
    header: Header
    ids: dict[str, str] = field(default_factory=dict)  # crystal id -> memory id
    memories: dict[str, list[str]] = field(default_factory=dict)  # memory id -> crystal ids
    current_texts: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, hash) -> memory id


@dataclass(frozen=True)
class TurnColumns:
    """The columns of this node's ``conversation_turns`` table (a newer schema may add some) that a
    turn row brings, and those of them that must have a value."""

    names: frozenset[str]
    required: frozenset[str]


def _turn_columns(memory: Memory) -> TurnColumns:
    rows = memory.db.all("PRAGMA table_info(conversation_turns)")
    own = {"crystal_id", "namespace"}  # from the restored crystal itself
    return TurnColumns(frozenset(row[1] for row in rows) - own,
                       frozenset(row[1] for row in rows if row[3] and row[4] is None) - own)


def judge(memory: Memory, file: IO[bytes]) -> _Judged:
    """Read the whole file once and judge every line; :class:`ImportRefused` with a count of the
    errors by kind if any line is not sound (nothing written)."""
    lines = _lines(file)
    first = next(lines, None)
    if first is None or first[1] is None:
        raise ImportRefused("the file is empty or its header line is too long")
    judged = _Judged(read_header(first[1]))
    columns = _turn_columns(memory)
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
        except _BadLine as error:
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
    columns = _turn_columns(memory)
    total = header.crystals
    file.seek(0)
    lines = _lines(file)
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


def _write(memory: Memory, lines: Iterator[tuple[int, bytes | None]], header: Header, columns: TurnColumns,
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
            except _BadLine as error:
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
    if isinstance(levels, dict) and isinstance(updated, int) and _int(updated, 0) and all(
            isinstance(key, str) and _real(value) for key, value in levels.items()):
        memory.hormones.restore_levels({key: float(value) for key, value in levels.items()}, int(updated))
        memory.save_hormones()


def import_path(memory: Memory, path: str | Path, progress: Progress | None = None) -> dict[str, Any]:
    """:func:`import_jsonl` of the file at ``path``."""
    try:
        with open(path, "rb") as handle:
            return import_jsonl(memory, handle, progress) | {"path": str(path)}
    except OSError as error:
        raise ImportRefused(f"cannot read {path}: {error.strerror}") from error


__all__ = ["FORMAT", "VERSION", "ImportRefused", "export_jsonl", "export_lines", "export_to_path",
           "import_jsonl", "import_path", "is_export"]
