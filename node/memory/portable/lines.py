"""One line of a portable export: its constants and kinds, and judging a line as hostile input.

Pure functions of bytes and plain values (no database): the header
(:func:`read_header`), a crystal line (:func:`read_record`, which runs
:func:`check_crystal` on the crystal) and the file's lines read with a bound on
each (:func:`read_lines`). A line that is not sound raises :class:`BadLine`,
whose ``kind`` the restore counts.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from node.crystals import COLUMNS, Crystal, content_hash, crystal_values
from node.memory.learning import Provenance, Tier
from node.memory.namespaces import InvalidNamespace, validate_namespace
from node.memory.search import MemoryInputError
from protocol.codec import json_too_deep

FORMAT = "crystalmesh-memory"
VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024  # a 192 KiB skill escaped (6x at worst), its window vectors and rows fit
MAX_DEPTH = 16  # a record nests 5 deep (crystal > provenanceDag > node > metadata > value)
MAX_WINDOWS = 512
MAX_PROVENANCE_NODES = 1024
MAX_ID_CHARS = 128
BATCH = 256
INT64 = (-(2**63), 2**63 - 1)
TIERS = frozenset(tier.value for tier in Tier)
KNOWLEDGE_PROVENANCE = frozenset(provenance.value for provenance in Provenance)
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


class BadLine(ValueError):
    """One line of an export file is not sound; ``kind`` counts it."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(detail or kind)
        self.kind = kind


def is_export_file(path: str | Path) -> bool:
    """Whether the file at ``path`` is an export (its first line a header), read no further."""
    with open(path, "rb") as handle:
        return is_export(handle.readline(MAX_LINE_BYTES + 1))


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
        raise BadLine("too_long", f"longer than {MAX_LINE_BYTES} bytes")
    if json_too_deep(line, MAX_DEPTH):
        raise BadLine("too_deep", f"nested deeper than {MAX_DEPTH}")
    try:
        value = json.loads(line)
        # Lone surrogates (``"\ud800"``) parse but cannot be stored: refuse them here.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError) as error:
        raise BadLine("not_json", str(error)[:80]) from error
    return value


def is_int(value: Any, low: int = INT64[0], high: int = INT64[1]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def is_real(value: Any) -> bool:
    return (isinstance(value, float) and math.isfinite(value)) or is_int(value)


def is_short_text(value: Any, limit: int = MAX_ID_CHARS) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and value.isprintable()


def check_crystal(crystal: Crystal) -> None:
    """Everything a restored crystal writes is of its column's kind, and it is one we export."""
    if not is_short_text(crystal.id) or not is_short_text(crystal.memory_id):
        raise BadLine("bad_crystal", "id and memoryId must be short printable strings")
    if not crystal.text.strip():
        raise BadLine("bad_crystal", "empty text")
    if crystal.hash != content_hash(crystal.text):
        raise BadLine("bad_hash", f"{crystal.id}: hash is not the text's sha256")
    try:
        validate_namespace(crystal.namespace)
    except InvalidNamespace as error:
        raise BadLine("bad_crystal", str(error)) from error
    if crystal.deleted_at_ms is not None:
        raise BadLine("bad_crystal", f"{crystal.id} is deleted (exports hold no tombstones)")
    governance = crystal.governance
    if governance.ttl_ms is not None and not is_int(governance.ttl_ms, 1):
        raise BadLine("bad_crystal", "ttlMs must be a positive integer")
    if not all(isinstance(actor, str) for actor in governance.provenance_chain) or not (
            governance.peer_origin is None or isinstance(governance.peer_origin, str)) or not is_real(
            governance.priority):
        raise BadLine("bad_crystal", "governance has a field of the wrong kind")
    if len(crystal.provenance_dag) > MAX_PROVENANCE_NODES or not all(
            isinstance(tag, str) for tag in crystal.skill_tags):
        raise BadLine("bad_crystal", "provenance or skill tags of the wrong shape")
    influence = crystal.hormonal_influence
    if influence is not None and not all(is_real(value) for value in vars(influence).values()):
        raise BadLine("bad_crystal", "hormonalInfluence must hold finite numbers")
    try:
        values = crystal_values(crystal)
    except (TypeError, ValueError, OverflowError) as error:
        raise BadLine("bad_crystal", str(error)[:80]) from error
    for name, value in zip(COLUMNS.split(", "), values, strict=True):
        if value is None:
            if name not in _NULLABLE:
                raise BadLine("bad_crystal", f"{name} is missing")
            continue
        kind = _COLUMN_KIND.get(name, "blob" if name == "embedding" else "text")
        if (kind == "int" and not is_int(value)) or (kind == "real" and not is_real(value)) or (
                kind == "text" and not isinstance(value, str)):
            raise BadLine("bad_crystal", f"{name} is not {'an integer' if kind == 'int' else 'a ' + kind}")


def read_vectors(value: Any, dim: int, kind: str, rows: int = 1) -> np.ndarray | None:
    """``value`` (base64 float32) as a ``rows × dim`` array of finite unit vectors; None stays None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadLine(kind, "not a base64 string")
    try:
        blob = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise BadLine(kind, "not base64") from error
    if dim <= 0 or len(blob) % (dim * 4) or not 1 <= len(blob) // (dim * 4) <= rows:
        raise BadLine(kind, f"not {'one' if rows == 1 else 'whole'} {dim}-d float32 vector(s)")
    vectors = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
    if not np.all(np.isfinite(vectors)) or np.any(np.abs(np.linalg.norm(vectors, axis=1) - 1.0) > 1e-3):
        raise BadLine(kind, "not finite unit vectors")
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
    except BadLine as error:
        raise ImportRefused(f"the header line is not sound: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ImportRefused(f"not a {FORMAT} export (its first line is no header)")
    if data.get("version") != VERSION:
        raise ImportRefused(f"export version {str(data.get('version'))[:20]!r} is not one this node reads "
                            f"(it reads version {VERSION}); import it with the crystalmesh that wrote it")
    embedder, dim, counts = data.get("embedder"), data.get("dim"), data.get("counts")
    second = data.get("second_opinion")
    if not is_short_text(embedder, 64) or not is_int(dim, 1, 8192) or not isinstance(counts, dict) or not is_int(
            counts.get("crystals"), 0):
        raise ImportRefused("the header's embedder, dim or counts are missing or of the wrong kind")
    second_pair = None
    if isinstance(second, dict) and is_short_text(second.get("encoder"), 64) and is_int(second.get("dim"), 1, 8192):
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
    chunk: dict[str, Any] | None = None
    side: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # SIDE_TABLES' rows


def _scalars(value: Any, kind: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
            isinstance(key, str) and (item is None or isinstance(item, str) or is_real(item))
            for key, item in value.items()):
        raise BadLine(kind, "not an object of plain values")
    return value


@dataclass(frozen=True)
class TurnColumns:
    """The columns of one of this node's tables beside the crystals (a newer schema may add some)
    that a row brings, and those of them that must have a value."""

    names: frozenset[str]
    required: frozenset[str]


# Rows of other concepts' tables beside a crystal, carried as they are: record key -> (table, the
# column naming the crystal, several rows). A dream's insight, the crystals it was read from, and
# how often the dream processed a crystal (node.memory.learning.insight_schema).
SIDE_TABLES: dict[str, tuple[str, str, bool]] = {
    "insight": ("dream_insights", "crystal_id", False),
    "insight_sources": ("dream_insight_sources", "insight_id", True),
    "dream_mark": ("dream_marks", "crystal_id", False),
}
MAX_SIDE_ROWS = 1024


@dataclass(frozen=True)
class NodeColumns:
    """What a line's rows may write here: the turn table's columns and each side table's."""

    turn: TurnColumns
    side: dict[str, TurnColumns]


def _side(value: Any, key: str, columns: TurnColumns, many: bool) -> list[dict[str, Any]]:
    """A side table's row(s) of a line, judged: plain values, the required columns present, only
    this node's columns kept (no name from the file reaches SQL)."""
    kind = f"bad_{key}"
    if value is None:
        return []
    rows = value if many else [value]
    if not isinstance(rows, list) or len(rows) > MAX_SIDE_ROWS:
        raise BadLine(kind, "not a list of rows" if many else "not one row")
    kept: list[dict[str, Any]] = []
    for row in rows:
        checked = _scalars(row, kind) or {}
        missing = sorted(columns.required - {name for name, item in checked.items() if item is not None})
        if missing:
            raise BadLine(kind, f"no {', '.join(missing)}")
        kept.append({name: item for name, item in checked.items() if name in columns.names})
    return kept


def read_record(line: bytes, header: Header, columns: NodeColumns) -> Record:
    """One crystal line, judged completely (raises :class:`BadLine`)."""
    data = _json_line(line)
    if not isinstance(data, dict) or not isinstance(data.get("crystal"), dict):
        raise BadLine("bad_crystal", "no crystal object")
    fields = {key: value for key, value in data["crystal"].items() if key != "embedding"}
    try:
        crystal = Crystal.from_dict(fields)
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as error:
        raise BadLine("bad_crystal", f"{type(error).__name__}: {str(error)[:60]}") from error
    check_crystal(crystal)
    vector = read_vectors(data.get("vector"), header.dim, "bad_vector")
    windows = read_vectors(data.get("windows"), header.dim, "bad_windows", MAX_WINDOWS)
    second = None
    if data.get("second") is not None:
        opinion = data["second"]
        if not isinstance(opinion, dict) or not is_short_text(opinion.get("encoder"), 64):
            raise BadLine("bad_second", "no encoder")
        if header.second is not None and opinion["encoder"] == header.second[0]:
            found = read_vectors(opinion.get("vector"), header.second[1], "bad_second")
            second = None if found is None else (header.second[0], found[0])
    turn = _scalars(data.get("turn"), "bad_turn")
    if turn is not None:
        for key in ("conversation", "source_id", "speaker", "session"):
            if not isinstance(turn.get(key), str):
                raise BadLine("bad_turn", f"{key} must be a string")
        for key in ("session_index", "turn_index"):
            if not is_int(turn.get(key)):
                raise BadLine("bad_turn", f"{key} must be an integer")
        missing = sorted(columns.turn.required - {key for key, value in turn.items() if value is not None})
        if missing:
            raise BadLine("bad_turn", f"no {', '.join(missing)}")
        turn = {key: value for key, value in turn.items() if key in columns.turn.names}
    knowledge = _scalars(data.get("knowledge"), "bad_knowledge")
    if knowledge is not None and not (
            is_real(knowledge.get("confidence")) and 0.0 <= float(knowledge["confidence"]) <= 1.0
            and is_int(knowledge.get("reference_ms")) and is_int(knowledge.get("episode_count"), 0)
            and is_int(knowledge.get("generation"), 0) and knowledge.get("provenance") in KNOWLEDGE_PROVENANCE
            and isinstance(knowledge.get("namespace", ""), str)
            and (knowledge.get("signer") is None or isinstance(knowledge.get("signer"), str))):
        raise BadLine("bad_knowledge", "confidence row of the wrong shape")
    energy = _scalars(data.get("energy"), "bad_energy")
    if energy is not None and not (energy.get("tier") in TIERS and is_real(energy.get("energy"))
                                   and is_int(energy.get("at_ms")) and is_int(energy.get("access_count"), 0)):
        raise BadLine("bad_energy", "energy row of the wrong shape")
    fact = _scalars(data.get("fact"), "bad_fact")
    if fact is not None and not (is_short_text(fact.get("fact_id")) and is_int(fact.get("added_at_ms"))):
        raise BadLine("bad_fact", "fact link of the wrong shape")
    side = {key: _side(data.get(key), key, columns.side.get(key, TurnColumns(frozenset(), frozenset())), many)
            for key, (_, _, many) in SIDE_TABLES.items()}
    return Record(crystal, None if vector is None else vector[0], windows, second, turn, knowledge, energy, fact,
                  _chunk(data.get("chunk")), {key: rows for key, rows in side.items() if rows})


def _chunk(value: Any) -> dict[str, Any] | None:
    """An indexed file's chunk row (and its file's row), judged."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadLine("bad_chunk", "not an object")
    file = _scalars(value.get("file"), "bad_chunk")
    chunk = _scalars({key: item for key, item in value.items() if key != "file"}, "bad_chunk") or {}
    if not (all(isinstance(chunk.get(key), str) and len(chunk[key]) <= 4096
                for key in ("path", "chunk_key", "memory_id", "hash"))
            and is_int(chunk.get("start_line"), 0) and is_int(chunk.get("end_line"), 0)):
        raise BadLine("bad_chunk", "chunk row of the wrong shape")
    if file is not None and not all(is_int(file.get(key)) for key in ("size", "mtime_ns", "chunks", "indexed_at_ms")):
        raise BadLine("bad_chunk", "file row of the wrong shape")
    return chunk | ({"file": file} if file is not None else {})


def read_lines(file: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
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
