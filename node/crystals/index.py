"""HNSW vector index (hnswlib): a cache of the store's embeddings.

The store is the truth. The index file sits beside the DB with a small JSON
sidecar recording what it covers (count, highest rowid, deletion checkpoint,
embedder). On open it is checked against the store: rows added since the
last save are caught up incrementally; a missing, corrupt or stale index
(deletions it never saw, counts that disagree, another embedder) is rebuilt
from the store with a progress bar. Labels are the store's integer rowids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from node.crystals.store import CrystalStore

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]


class ReadWriteLock:
    """Many concurrent readers or one writer: hnswlib is unsafe to add to while querying.

    Writers take precedence: once a writer waits, new readers queue behind it,
    so a steady stream of queries cannot starve ingestion.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass
class IndexParams:
    dim: int
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 100


def stderr_progress(label: str) -> ProgressCallback:
    """A dependency-free progress bar on stderr (only drawn on a terminal or when long)."""

    def report(done: int, total: int) -> None:
        if total <= 0:
            return
        width = 30
        filled = int(width * done / total)
        bar = "#" * filled + "-" * (width - filled)
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{label} [{bar}] {done}/{total}{end}")
        sys.stderr.flush()

    return report


def file_sha256(path: Path) -> str | None:
    """Hex SHA-256 of a file's bytes, or None if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


class VectorIndex:
    def __init__(self, path: Path, params: IndexParams, embedder_name: str) -> None:
        self.path = Path(path)
        self.sidecar = self.path.with_suffix(self.path.suffix + ".json")
        self.params = params
        self.embedder_name = embedder_name
        self.lock = ReadWriteLock()
        self._index = self._empty(1024)
        self._count = 0
        self._max_rowid = 0
        self._deletions = 0
        self._dirty = 0

    def _empty(self, capacity: int) -> Any:
        index = hnswlib.Index(space="cosine", dim=self.params.dim)
        index.init_index(
            max_elements=capacity, M=self.params.m, ef_construction=self.params.ef_construction
        )
        index.set_ef(self.params.ef_search)
        return index

    @property
    def count(self) -> int:
        return self._count

    # --- open / validate / rebuild -----------------------------------------------------------
    def open(self, store: CrystalStore, progress: ProgressCallback | None = None) -> str:
        """Load and check against the store; returns "loaded", "caught_up" or "rebuilt"."""
        want_count, want_max = store.vector_stats()
        want_deletions = store.checkpoint("vector_deletions")
        meta = self._read_sidecar()
        reason = None
        if meta is None or not self.path.exists():
            reason = "missing"
        elif meta.get("embedder") != self.embedder_name or meta.get("dim") != self.params.dim:
            reason = "embedder changed"
        elif meta.get("deletions") != want_deletions:
            reason = "deletions since last save"
        elif meta.get("max_rowid", 0) > want_max:
            reason = "index ahead of store"
        elif meta.get("sha256") != file_sha256(self.path):
            # A damaged index can load and then crash hnswlib on a later search (segfault):
            # never load one whose bytes are not the ones we saved.
            reason = "checksum mismatch (file changed since it was saved)"
        if reason is None:
            try:
                index = hnswlib.Index(space="cosine", dim=self.params.dim)
                index.load_index(str(self.path), max_elements=int(meta["capacity"]))  # type: ignore[index]
                # ef resets to 10 after load_index: set it again or recall collapses.
                index.set_ef(self.params.ef_search)
                self._index = index
                self._count = int(meta["count"])  # type: ignore[index]
                self._max_rowid = int(meta["max_rowid"])  # type: ignore[index]
                self._deletions = want_deletions
            except (RuntimeError, OSError, KeyError, ValueError) as exc:
                reason = f"unreadable ({exc})"
        if reason is None:
            added = self._catch_up(store, progress)
            if self._count == want_count:
                if added:
                    self.save()
                return "caught_up" if added else "loaded"
            reason = f"count mismatch (index {self._count}, store {want_count})"
        log.info("rebuilding vector index reason=%s vectors=%d", reason, want_count)
        self.rebuild(store, progress)
        return "rebuilt"

    def _catch_up(self, store: CrystalStore, progress: ProgressCallback | None) -> int:
        added = 0
        for rowids, vectors in store.vectors(after_rowid=self._max_rowid):
            self.add(rowids, vectors)
            added += len(rowids)
        if added and progress:
            progress(added, added)
        return added

    def rebuild(self, store: CrystalStore, progress: ProgressCallback | None = None) -> None:
        total, _ = store.vector_stats()
        with self.lock.write():
            self._index = self._empty(max(1024, int(total * 1.25)))
            self._count = 0
            self._max_rowid = 0
        done = 0
        for rowids, vectors in store.vectors():
            self.add(rowids, vectors)
            done += len(rowids)
            if progress:
                progress(done, total)
        if progress and total == 0:
            progress(0, 0)
        self._deletions = store.checkpoint("vector_deletions")
        self.save()

    # --- mutation -----------------------------------------------------------------------------
    def add(self, rowids: np.ndarray, vectors: np.ndarray) -> None:
        if len(rowids) == 0:
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape[1] != self.params.dim:
            raise ValueError(f"vector dim {vectors.shape[1]} != index dim {self.params.dim}")
        with self.lock.write():
            # Deleted labels keep their slots until a rebuild, so capacity is measured
            # against hnswlib's element count, not against the live ``_count``.
            needed = self._index.get_current_count() + len(rowids)
            capacity = self._index.get_max_elements()
            if needed > capacity:
                self._index.resize_index(max(needed, capacity * 2))
            self._index.add_items(vectors, np.asarray(rowids, dtype=np.int64))
            self._count += len(rowids)
            self._max_rowid = max(self._max_rowid, int(np.max(rowids)))
            self._dirty += len(rowids)

    def mark_deleted(self, rowids: list[int], deletions_checkpoint: int) -> None:
        with self.lock.write():
            for rowid in rowids:
                try:
                    self._index.mark_deleted(int(rowid))
                    self._count -= 1
                except RuntimeError:
                    pass  # never indexed (e.g. no embedding): nothing to delete
            self._deletions = deletions_checkpoint
            self._dirty += len(rowids)

    # --- query --------------------------------------------------------------------------------
    def query(
        self, vector: np.ndarray, k: int, allowed: Callable[[int], bool] | None = None
    ) -> list[tuple[int, float]]:
        """Top-k as (rowid, cosine similarity); with ``allowed``, only among rowids it accepts
        (hnswlib filters during the graph walk, so a small namespace still gets its k)."""
        with self.lock.read():
            if self._count == 0:
                return []
            k = min(k, self._count)
            self._index.set_ef(max(self.params.ef_search, k))
            try:
                labels, distances = self._index.knn_query(
                    np.asarray(vector, dtype=np.float32).reshape(1, -1), k=k, filter=allowed
                )
            except RuntimeError:
                # Fewer than k labels pass the filter: hnswlib refuses instead of answering short.
                if allowed is None:
                    raise
                return self._query_short(vector, k, allowed)
        return [
            (int(label), 1.0 - float(distance))
            for label, distance in zip(labels[0], distances[0], strict=True)
        ]

    def _query_short(
        self, vector: np.ndarray, k: int, allowed: Callable[[int], bool]
    ) -> list[tuple[int, float]]:
        while k > 1:
            k //= 2
            try:
                labels, distances = self._index.knn_query(
                    np.asarray(vector, dtype=np.float32).reshape(1, -1), k=k, filter=allowed
                )
            except RuntimeError:
                continue
            return [(int(label), 1.0 - float(distance))
                    for label, distance in zip(labels[0], distances[0], strict=True)]
        return []

    # --- persistence --------------------------------------------------------------------------
    def _read_sidecar(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.sidecar.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def save(self) -> None:
        """Write-then-rename, index first and sidecar last, so a crash leaves a stale sidecar."""
        with self.lock.read():
            tmp = self.path.with_name(self.path.name + ".tmp")
            self._index.save_index(str(tmp))
            digest = file_sha256(tmp)
            os.replace(tmp, self.path)
            meta = {
                "sha256": digest,
                "count": self._count,
                "max_rowid": self._max_rowid,
                "deletions": self._deletions,
                "capacity": self._index.get_max_elements(),
                "embedder": self.embedder_name,
                "dim": self.params.dim,
            }
        tmp_meta = self.sidecar.with_name(self.sidecar.name + ".tmp")
        tmp_meta.write_text(json.dumps(meta))
        os.replace(tmp_meta, self.sidecar)
        self._dirty = 0

    @property
    def dirty(self) -> int:
        return self._dirty
