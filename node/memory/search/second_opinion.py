"""A second embedder's opinion on the dense candidates (docs/memory.md, "Second opinion").

The vector index holds one vector per crystal, from the store's embedder. A
second, different sentence encoder also embeds every crystal (table
``crystal_second``, written in the transaction that writes the crystal, removed
with its row, rewritten by ``memory reembed``), and search re-scores the dense
candidates of the index as ``cos + SECOND_OPINION_WEIGHT · cos₂``, where ``cos₂``
is the second encoder's cosine between the question and the memory. Two models
trained differently err differently: on reworded questions (no word shared with
the answer) the pair ranks better than either alone, which no re-weighting of
dense and BM25 lists could do (docs/retrieval-tuning.md, "Second opinion").

Which second: ``memory.second_opinion = "auto"`` (default) gives the default
MiniLM-L6 the 3-layer paraphrase-MiniLM-L3 (:mod:`node.memory.embedding.embedder_l3`), and
the opt-in MPNet the MiniLM-L6; ``"none"`` turns it off. Other embedders (the
tests' hashing one) have none.

Never a partial opinion: the candidates are re-scored only if every one of them
has a valid vector of the configured second encoder; otherwise (a store written
without it, a crafted row) the dense list is left as it is, and
:func:`missing_count` lets the node say so at start (``memory reembed`` to the
store's own embedder writes them all). The table is a file on disk and may be
crafted: a row of another encoder, a blob that is not one ``dim``-vector, a
non-finite value or a vector that is not unit length is ignored (and logged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from node.config import ConfigError
from node.crystals import Crystal
from node.db import Database
from node.memory.embedding import Embedder, ModelFilesMissing, embed_windows, get_embedder
from node.memory.search.windows import unit_rows, vector_rows

log = logging.getLogger(__name__)

# Chosen on tune data only (v2 tune and the first fresh set; docs/retrieval-tuning.md, "Second
# opinion"): 0.2-0.3 helps both sets with both pairs; 0.25 is the middle.
SECOND_OPINION_WEIGHT = 0.25
AUTO = "auto"
NONE = "none"
CHOICES = (AUTO, NONE, "l3", "minilm")
# The model of the store's embedder (the start of its ``Embedder.name``) -> the second opinion
# "auto" gives it (an ``embedder.get_embedder`` name).
AUTO_PAIRS = {"all-MiniLM-L6-v2-onnx": "l3", "all-mpnet-base-v2-onnx": "minilm"}


def second_name(configured: str, embedder_name: str) -> str | None:
    """The second encoder (an ``embedder.get_embedder`` name) for a store whose embedder is called
    ``embedder_name`` (``Embedder.name``), or ``None``. Raises ``ConfigError`` on an unknown setting."""
    if configured not in CHOICES:
        raise ConfigError(f"unknown memory.second_opinion {configured!r}; choose one of: {', '.join(CHOICES)}")
    if configured == NONE:
        return None
    if configured == AUTO:
        return next((second for model, second in AUTO_PAIRS.items() if embedder_name.startswith(model)), None)
    return configured


def open_second_opinion(configured: str, embedder: Embedder, db: Database) -> Embedder | None:
    """The second encoder ``memory.second_opinion`` (``configured``) names for a store of ``embedder``,
    loaded, or ``None``. Under ``"auto"`` a missing or changed model file is logged and the node runs
    without it; named explicitly, it raises. A store with crystals lacking its vectors is logged too."""
    name = second_name(configured, embedder.name)
    if name is None:
        return None
    try:
        second = get_embedder(name)
    except ModelFilesMissing as error:
        if configured != AUTO:
            raise
        log.warning("second_opinion_unavailable encoder=%s: %s", name, error)
        return None
    if second.name.split("-onnx-")[0] == embedder.name.split("-onnx-")[0]:
        raise ConfigError(f"memory.second_opinion {configured!r} is the store's own embedder")
    missing = missing_count(db, second.name)
    if missing:
        log.warning("second_opinion_incomplete encoder=%s missing=%d: search goes without it until "
                    "`crystalmesh memory reembed` (to the store's own embedder) writes them", second.name, missing)
    return second


def give_opinions(second: Embedder | None, crystals: Sequence[Crystal], packed: bool = False) -> None:
    """Give each of ``crystals`` without one ``second``'s vector of its text (the store writes it);
    ``packed``: batches packed by token count (``embedding.embed_windows``)."""
    if second is None:
        return
    pending = [crystal for crystal in crystals if crystal.second_embedding is None]
    if pending:
        vectors, _ = embed_windows(second, [crystal.text for crystal in pending], packed)
        for crystal, vector in zip(pending, vectors, strict=True):
            crystal.second_embedding = (second.name, vector.tolist())


def opinion_status(second: Embedder | None, db: Database) -> dict[str, Any]:
    """What ``memory status`` says of the second opinion: its encoder and the crystals lacking it."""
    if second is None:
        return {"second_opinion": None}
    return {"second_opinion": {"encoder": second.name, "missing": missing_count(db, second.name)}}


def read_vectors(db: Database, rowids: Iterable[int], encoder: str, dim: int) -> dict[int, np.ndarray]:
    """The valid second-opinion vectors (``(dim,)`` float32) of those of ``rowids`` that have one."""
    found: dict[int, np.ndarray] = {}
    kept: list[int] = []
    blobs: list[bytes] = []
    for row in vector_rows(db, "crystal_second", rowids, dim * 4):
        rowid, blob = int(row["crystal_rowid"]), row["vectors"]
        if row["model"] == encoder and isinstance(blob, bytes) and dim > 0 and len(blob) == dim * 4:
            kept.append(rowid)
            blobs.append(blob)
        else:
            _ignored(rowid, row["size"], encoder, dim)
    if blobs:
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        valid = unit_rows(matrix)  # checked all at once, as window rows are
        for position, rowid in enumerate(kept):
            if valid[position]:
                found[rowid] = matrix[position]
            else:
                _ignored(rowid, dim * 4, encoder, dim)
    return found


def _ignored(rowid: int, size: object, encoder: str, dim: int) -> None:
    log.warning("second_opinion_vector_ignored rowid=%d size=%s (not %s's %d dimensions)", rowid, size, encoder, dim)


def rescore(dense: list[tuple[int, float]], vectors: dict[int, np.ndarray], query: np.ndarray,
            weight: float = SECOND_OPINION_WEIGHT) -> list[tuple[int, float]]:
    """``dense`` re-scored ``cos + weight · cos₂`` and re-sorted, if every candidate has a second
    vector in ``vectors``; otherwise ``dense`` unchanged (never a partial opinion)."""
    if not dense or any(rowid not in vectors for rowid, _ in dense):
        return dense
    matrix = np.vstack([vectors[rowid] for rowid, _ in dense])
    second = matrix @ np.asarray(query, dtype=np.float32)
    scored = [(rowid, score + weight * float(other)) for (rowid, score), other in zip(dense, second, strict=True)]
    scored.sort(key=lambda item: item[1], reverse=True)
    return scored


def opinion_of(db: Database, second: Embedder | None, query: str,
               dense: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``dense`` (the index's candidates for ``query``) re-scored by ``second``'s opinion, if every
    candidate has a valid vector of it (only then is the question embedded); else unchanged."""
    if second is None or not dense:
        return dense
    opinions = read_vectors(db, (rowid for rowid, _ in dense), second.name, second.dim)
    if any(rowid not in opinions for rowid, _ in dense):
        return dense
    return rescore(dense, opinions, second.embed([query])[0])


def missing_count(db: Database, encoder: str) -> int:
    """How many embedded crystals have no second-opinion vector of ``encoder``: the embedded crystals
    less the encoder's rows (a row exists only beside its crystal), from two indexes (schema 5)."""
    row = db.one(
        "SELECT MAX(0, (SELECT COUNT(*) FROM crystals WHERE embedding IS NOT NULL) "
        "- (SELECT COUNT(*) FROM crystal_second WHERE encoder = ?)) AS n",
        (encoder,),
    )
    return int(row["n"]) if row is not None else 0


__all__ = ["AUTO", "CHOICES", "NONE", "SECOND_OPINION_WEIGHT", "give_opinions", "missing_count",
           "open_second_opinion", "opinion_of", "opinion_status", "read_vectors", "rescore", "second_name"]
