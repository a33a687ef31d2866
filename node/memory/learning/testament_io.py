"""Export and import of testaments (seed 003, genomic bottleneck).

Export selects, in this order and up to 2,048 entries: every live warning, every
directive (what the user said carries over to the successor), facts
at or above ``testament_min_confidence`` (most confident first), procedural
knowledge (skills, task patterns), then the most important episodes. Secrets
(confidential scope or sensitivity) never leave the node. The file is signed
with the node's Ed25519 identity (:mod:`protocol.testament`) and written 0600.

Import verifies the whole file before touching the store, then adds every
entry in one transaction: confidence × 0.85 (one generation), warnings kept at
or above their floor, provenance ``imported`` with the signer recorded. A text
the node already holds is skipped (local knowledge wins). A file that fails any
check changes nothing. Imported episodes never fold into facts here
(``KnowledgeStore.unconsolidated_episodes``): an inherited fact re-earns
confidence only from the successor's own observations.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from node.crystals import (
    AccessScope,
    Crystal,
    Lifecycle,
    Origin,
    ProvenanceNode,
    ProvenanceOperation,
    SemanticType,
    Sensitivity,
    now_ms,
)
from node.errors import CrystalmeshError
from node.memory.learning import confidence as conf
from node.memory.learning.knowledge import KnowledgeRow, Provenance, audit, upsert
from node.memory.learning.learning import DEAD, is_warning, namespace_of
from node.memory.namespaces import InvalidNamespace, validate_namespace
from node.memory.search import MemoryInputError, set_vectors
from protocol.identity import Identity
from protocol.testament import (
    MAX_ENTRIES,
    MAX_LINKS,
    MAX_SOURCES,
    MAX_TESTAMENT_BYTES,
    MAX_TEXT_BYTES,
    InvalidTestament,
    TestamentEntry,
    open_testament,
    seal_testament,
)

if TYPE_CHECKING:
    from node.memory.learning.learning import Learning
    from node.memory.owner import MemoryOwner as Memory

log = logging.getLogger(__name__)

KIND_OF = {
    SemanticType.WARNING: "warning",
    SemanticType.DIRECTIVE: "directive",
    SemanticType.FACT: "fact",
    SemanticType.SKILL: "skill",
    SemanticType.TASK_PATTERN: "task_pattern",
    SemanticType.EPISODE: "episode",
}
TYPE_OF = {kind: semantic_type for semantic_type, kind in KIND_OF.items()}
ORDER = (SemanticType.WARNING, SemanticType.DIRECTIVE, SemanticType.FACT, SemanticType.SKILL, SemanticType.TASK_PATTERN, SemanticType.EPISODE)


class TestamentRefused(CrystalmeshError, ValueError):
    """A testament file was refused (unreadable, oversized, malformed, tampered); nothing was imported."""

    __test__ = False
    http_status = 400
    code = "testament_refused"


def _exportable(crystal: Crystal) -> bool:
    return (
        crystal.lifecycle not in DEAD
        and not crystal.deprecated
        and crystal.governance.access_scope is not AccessScope.CONFIDENTIAL
        and crystal.governance.sensitivity is not Sensitivity.CONFIDENTIAL
        and len(crystal.text.encode("utf-8")) <= MAX_TEXT_BYTES
    )


def _candidates(memory: Memory, learning: Learning, at_ms: int) -> list[tuple[Crystal, float]]:
    settings = memory.config.memory
    chosen: list[tuple[Crystal, float]] = []
    for semantic_type in ORDER:
        # list_crystals is bounded; the bottleneck is 2,048, so more per type is never needed.
        crystals = [c for c in _list(memory, semantic_type) if _exportable(c)]
        values = learning.confidences(crystals, at_ms)
        if semantic_type is SemanticType.FACT:
            crystals = [c for c in crystals if values[c.id] >= settings.testament_min_confidence]
            crystals.sort(key=lambda c: (-values[c.id], c.id))
        elif semantic_type is SemanticType.EPISODE:
            crystals.sort(key=lambda c: (-c.importance_score, c.id))
            crystals = crystals[: settings.testament_top_episodes]
        chosen.extend((c, values[c.id]) for c in crystals)
    return chosen[:MAX_ENTRIES]


def _list(memory: Memory, semantic_type: SemanticType) -> list[Crystal]:
    from node.crystals import Filters

    return memory.store.list_crystals(Filters(semantic_types=(semantic_type.value,)), limit=4 * MAX_ENTRIES)


def export_testament(
    memory: Memory, learning: Learning, identity: Identity, path: Path | None, at_ms: int | None = None
) -> dict[str, Any]:
    """Select, sign and (when ``path`` is given) write a testament; the bytes are in ``data``."""
    at = at_ms if at_ms is not None else now_ms()
    entries: list[TestamentEntry] = []
    for crystal, value in _candidates(memory, learning, at):
        row = learning.knowledge.get(crystal.id)
        links = sorted({p for node in crystal.provenance_dag for p in node.parent_ids})[:MAX_LINKS]
        sources = learning.knowledge.sources(crystal.id)[-MAX_SOURCES:]
        entries.append(
            TestamentEntry(
                id=crystal.id,
                kind=KIND_OF[crystal.semantic_type],
                text=crystal.text,
                namespace=(row.namespace if row else namespace_of(crystal)) or None,
                confidence_ppm=conf.to_ppm(value),
                generation=row.generation if row else 0,
                episode_count=row.episode_count if row else 1,
                source_episodes=tuple(sources),
                links=tuple(links),
                created_at_ms=crystal.created_at_ms,
            )
        )
    data = seal_testament(identity, entries, at)
    if path is not None:
        write_private(path, data)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.kind] = counts.get(entry.kind, 0) + 1
    return {"path": str(path) if path else None, "entries": len(entries), "bytes": len(data),
            "kinds": counts, "signer": identity.peer_id, "data": data}


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only (0600)."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def read_testament_file(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TESTAMENT_BYTES + 1)
    except OSError as error:
        raise TestamentRefused(f"cannot read {path}: {error.strerror}") from error
    if len(data) > MAX_TESTAMENT_BYTES:
        raise TestamentRefused(f"{path} is larger than {MAX_TESTAMENT_BYTES} bytes")
    return data


def import_testament(memory: Memory, learning: Learning, data: bytes, at_ms: int | None = None) -> dict[str, Any]:
    """Verify ``data`` whole, then add its entries in one transaction (see the module docstring)."""
    at = at_ms if at_ms is not None else now_ms()
    try:
        testament = open_testament(data)
    except InvalidTestament as error:
        raise TestamentRefused(f"testament refused: {error}") from error
    signer = testament.signer_peer_id
    actor = f"testament:{signer}"
    prepared: list[tuple[Crystal, KnowledgeRow]] = []
    seen: set[str] = set()
    known = 0
    for entry in testament.body.entries:
        try:
            namespace = validate_namespace(entry.namespace)
            crystal = memory.prepare(entry.text, semantic_type=TYPE_OF[entry.kind], origin=Origin.PEER,
                                     actor=actor, namespace=namespace)
        except (MemoryInputError, InvalidNamespace) as error:
            raise TestamentRefused(f"testament refused: entry {entry.id}: {error}") from error
        key = f"{namespace}\x00{crystal.hash}"
        if key in seen or memory.store.find_by_hash(crystal.hash, namespace) is not None:
            known += 1
            continue
        seen.add(key)
        crystal.created_at_ms = crystal.valid_from_ms = at
        crystal.governance.peer_origin = signer
        if crystal.lifecycle is not Lifecycle.FROZEN:
            crystal.lifecycle = Lifecycle.GENERATED
        crystal.provenance_dag = [
            ProvenanceNode(crystal.id, ProvenanceOperation.IMPORTED, actor, at, [],
                           {"source_id": entry.id, "generation": entry.generation + 1,
                            "links": list(entry.links), "source_episodes": list(entry.source_episodes)})
        ]
        value = conf.generational_confidence(conf.from_ppm(entry.confidence_ppm), 1)
        if is_warning(crystal):
            value = max(value, conf.WARNING_FLOOR)
        prepared.append((crystal, KnowledgeRow(crystal.id, value, at, max(1, entry.episode_count),
                                               entry.generation + 1, Provenance.IMPORTED, signer,
                                               namespace)))
    vectors, windows = memory.embed_windows([c.text for c, _ in prepared])
    for (crystal, _), vector, split in zip(prepared, vectors, windows, strict=True):
        set_vectors(crystal, vector, split)
    memory.second_opinions([crystal for crystal, _ in prepared])
    with memory.db.transaction() as conn:
        results = memory.store.add_many([c for c, _ in prepared])
        for (_crystal, row), result in zip(prepared, results, strict=True):
            upsert(conn, KnowledgeRow(result.id, *_rest(row)))
            audit(conn, result.id, "imported", at, None, f"{row.confidence:.6f}",
                  {"signer": signer, "generation": row.generation})
    new = [(r.rowid, i) for i, r in enumerate(results) if r.created]
    if new:
        memory.index.add(np.array([rowid for rowid, _ in new], dtype=np.int64), np.vstack([vectors[i] for _, i in new]))
    return {"signer": signer, "issued_at_ms": testament.body.issued_at_ms, "imported": len(prepared),
            "already_known": known, "entries": len(testament.body.entries)}


def _rest(row: KnowledgeRow) -> tuple[Any, ...]:
    return (row.confidence, row.reference_ms, row.episode_count, row.generation, row.provenance, row.signer,
            row.namespace)
