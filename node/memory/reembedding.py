"""Move a data dir to another embedder, all at once or not at all (seed 003: never partially re-embed).

Vectors of two embedders are not comparable, so a store holds one embedder's
vectors only. :func:`reembed` changes which one:

1. every embedded crystal's text is embedded with the new embedder (and a long
   text's windows too), in memory
   (nothing on disk changes; a kill here leaves the old store as it was);
2. one SQLite transaction checks that no crystal was added, removed or edited
   since step 1, then writes every new vector (and replaces every long crystal's
   window vectors, :mod:`node.memory.search.windows`, and every second-opinion vector,
   :mod:`node.memory.search.second_opinion`) and the store's embedder name,
   dimension and key (``meta``), and records ``embedder_migrated_from``;
   this commit is the switch;
3. ``node.toml``'s ``[memory] embedder`` is rewritten (temp file + rename);
4. the HNSW index is built aside from the committed vectors and renamed over
   the old one, index file first and sidecar last (a kill in between leaves a
   sidecar naming the old embedder, so the next open rebuilds the index).

A kill between steps 2 and 3 leaves ``node.toml`` naming the old embedder:
:func:`configured_embedder_key` sees that the store was migrated *from* that
embedder and answers the store's new key, so the data dir opens with the
embedder its vectors came from. The command refuses to run while a node
serves the data dir (the caller checks; step 2's check catches the rest).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from node.config import NodeConfig, dump_config, load_config
from node.crystals import CrystalStore, IndexParams, VectorIndex, vector_bytes
from node.db import Database
from node.errors import CrystalmeshError
from node.memory.embedding import EMBEDDER_NAMES, Embedder, embed_windows, get_embedder
from node.memory.search import second_name

log = logging.getLogger(__name__)

BATCH = 256
Progress = Callable[[int, int], None]


class ReembedError(CrystalmeshError, RuntimeError):
    """The store changed while re-embedding, or cannot be re-embedded; nothing was written."""

    http_status = 409
    code = "reembed"


@dataclass(frozen=True)
class ReembedReport:
    crystals: int
    old_embedder: str | None
    new_embedder: str
    dim: int
    second_opinion: str | None  # the encoder whose vectors were written beside (node.memory.search.second_opinion)
    embed_s: float
    total_s: float


def configured_embedder_key(config: NodeConfig, db: Database) -> str:
    """The embedder key a data dir must open with.

    ``config.memory.embedder`` unless a re-embed committed but died before
    rewriting ``node.toml``: then the store says it was migrated from the
    configured key to another one, and that one holds the vectors.
    """
    configured = config.memory.embedder
    stored_key = db.get_meta("embedder_key")
    migrated = db.get_meta("embedder_migrated_from") == configured
    # The meta table is on disk, so it may be crafted: only a known key is followed.
    if stored_key in EMBEDDER_NAMES and stored_key != configured and migrated:
        log.warning(
            "embedder_config_stale configured=%s store=%s (a re-embed finished its commit; "
            "node.toml not yet rewritten)",
            configured,
            stored_key,
        )
        return stored_key
    return configured


def _snapshot(db: Database) -> list[tuple[int, str, str]]:
    rows = db.all(
        "SELECT rowid, hash, text FROM crystals WHERE embedding IS NOT NULL ORDER BY rowid"
    )
    return [(int(row[0]), str(row[1]), str(row[2])) for row in rows]


def _write_config(config: NodeConfig, key: str) -> None:
    # Rewrite from node.toml alone (not from env overrides), then swap the file in.
    on_disk = load_config(config.data_dir, environ={})
    on_disk.memory.embedder = key
    tmp = config.config_path.with_name(config.config_path.name + ".tmp")
    tmp.write_text(dump_config(on_disk))
    os.replace(tmp, config.config_path)


def _swap_index(config: NodeConfig, db: Database, embedder: Embedder) -> None:
    aside = config.index_path.with_name(config.index_path.name + ".next")
    index = VectorIndex(
        aside,
        IndexParams(
            dim=embedder.dim,
            m=config.memory.hnsw_m,
            ef_construction=config.memory.hnsw_ef_construction,
            ef_search=config.memory.hnsw_ef_search,
        ),
        embedder.name,
    )
    index.rebuild(CrystalStore(db))
    os.replace(aside, config.index_path)
    sidecar = config.index_path.with_name(config.index_path.name + ".json")
    os.replace(index.sidecar, sidecar)


def reembed(
    config: NodeConfig,
    key: str,
    *,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> ReembedReport:
    """Re-embed every crystal of ``config``'s data dir with the embedder called ``key`` (and with
    the second encoder ``memory.second_opinion`` gives it, whose vectors are all rewritten too)."""
    started = time.perf_counter()
    new = embedder or get_embedder(key)
    second_key = second_name(config.memory.second_opinion, new.name)
    second = get_embedder(second_key) if second_key else None
    db = Database(config.db_path)
    try:
        CrystalStore(db)  # runs the crystals migrations: the tables exist from here on
        old_name = db.get_meta("embedder_name")
        old_key = configured_embedder_key(config, db)
        snapshot = _snapshot(db)
        vectors = np.zeros((len(snapshot), new.dim), dtype=np.float32)
        windows: dict[int, np.ndarray] = {}  # rowid -> a long text's window vectors
        seconds = np.zeros((len(snapshot) if second else 0, second.dim if second else 0), dtype=np.float32)
        for start in range(0, len(snapshot), BATCH):
            chunk = snapshot[start : start + BATCH]
            texts = [text for _, _, text in chunk]
            vectors[start : start + len(chunk)], split = embed_windows(new, texts)
            if second is not None:
                seconds[start : start + len(chunk)] = second.embed(texts)
            windows.update((rowid, each) for (rowid, _, _), each in zip(chunk, split, strict=True)
                           if each is not None and len(each) > 1)
            if progress:
                progress(start + len(chunk), len(snapshot))
        if progress and not snapshot:
            progress(0, 0)
        if not (np.all(np.isfinite(vectors)) and np.all(np.isfinite(seconds))
                and all(np.all(np.isfinite(w)) for w in windows.values())):
            raise ReembedError(f"embedder {key!r} returned non-finite vectors; nothing changed")
        embed_s = time.perf_counter() - started
        with db.transaction() as conn:
            if _snapshot(db) != snapshot:
                raise ReembedError(
                    "crystals changed while re-embedding; nothing changed, run it again"
                )
            conn.executemany(
                "UPDATE crystals SET embedding=? WHERE rowid=?",
                (
                    (vector_bytes(vector), rowid)
                    for (rowid, _, _), vector in zip(snapshot, vectors, strict=True)
                ),
            )
            # Window vectors belong to the embedder too: every old one goes, the new ones come.
            conn.execute("DELETE FROM crystal_windows")
            conn.executemany(
                "INSERT INTO crystal_windows(crystal_rowid, embedder, vectors) VALUES (?, ?, ?)",
                ((rowid, new.name, vector_bytes(each)) for rowid, each in sorted(windows.items())),
            )
            # So do second opinions: the new embedder's own, for every crystal, or none at all.
            conn.execute("DELETE FROM crystal_second")
            if second is not None:
                conn.executemany(
                    "INSERT INTO crystal_second(crystal_rowid, encoder, vector) VALUES (?, ?, ?)",
                    ((rowid, second.name, vector_bytes(vector))
                     for (rowid, _, _), vector in zip(snapshot, seconds, strict=True)),
                )
            for name, value in (
                ("embedder_name", new.name),
                ("embedder_dim", str(new.dim)),
                ("embedder_key", key),
                ("embedder_migrated_from", old_key),
            ):
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES(?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (name, value),
                )
        log.info("reembed_committed crystals=%d from=%s to=%s", len(snapshot), old_name, new.name)
        _write_config(config, key)
        _swap_index(config, db, new)
    finally:
        db.close()
    return ReembedReport(
        crystals=len(snapshot),
        old_embedder=old_name,
        new_embedder=new.name,
        dim=new.dim,
        second_opinion=second.name if second else None,
        embed_s=round(embed_s, 3),
        total_s=round(time.perf_counter() - started, 3),
    )
