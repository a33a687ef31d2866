"""``memory index PATH…``: walk, read what changed, hand it to the node's memory in batches.

One driver for every caller; only the :class:`Target` differs: the data dir's
``Memory`` in this process (the CLI with no node running), a running node's
API (the CLI beside a node: this process reads the files and sends their bytes,
base64, in batches under the API's body limit), or the node's own memory (its
``memory.index_paths``, from a worker thread).

Per root: walk it; ask the target what it knows under the root; read only the
files whose size or mtime changed (or whose chunks are no longer all current),
in batches of at most ``batch_bytes``; then tell the target which known files
are no longer there (deleted, or now ignored, binary, too big...), with why.
An unchanged tree is one walk and one query: no file is read, nothing embedded.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from node.memory.files.documents import is_binary
from node.memory.files.folders import DEFAULT_MAX_FILE_BYTES, FileEntry, read_file, walk
from node.memory.files.sync import Document, FileState, merge_summaries

log = logging.getLogger(__name__)

BATCH_BYTES = 512 * 1024  # file bytes per batch (base64: ~700 KB, under the API's 1 MiB body limit)
BATCH_FILES = 256
REMOVED_BATCH_BYTES = 256 * 1024  # paths per "these are gone" call, by their length
ENTRY_OVERHEAD = 96  # JSON around one document or path
Progress = Callable[[str], None]


class Target(Protocol):
    """Where the index goes: ``LocalNode``, ``ApiClient`` or the node's own ``AsyncMemory``."""

    max_document_bytes: int  # the largest file one call can carry

    def known_files(self, namespace: str | None, root: str) -> dict[str, FileState]: ...
    def sync_files(self, namespace: str | None, documents: Sequence[Document],
                   removed: dict[str, str]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class IndexOptions:
    namespace: str | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    exclude: tuple[str, ...] = ()  # never indexed: the node's data dir
    batch_bytes: int = BATCH_BYTES


def _unchanged(entry: FileEntry, known: dict[str, FileState]) -> bool:
    state = known.get(entry.path)
    return state is not None and state.fresh and (state.size, state.mtime_ns) == (entry.size, entry.mtime_ns)


def _batches(entries: Sequence[FileEntry], batch_bytes: int) -> list[list[FileEntry]]:
    batches: list[list[FileEntry]] = [[]]
    size = 0
    for entry in entries:
        cost = entry.size + len(entry.path) + ENTRY_OVERHEAD
        if batches[-1] and (size + cost > batch_bytes or len(batches[-1]) >= BATCH_FILES):
            batches.append([])
            size = 0
        batches[-1].append(entry)
        size += cost
    return [batch for batch in batches if batch]


def index_paths(target: Target, roots: Sequence[str | Path], options: IndexOptions,
                progress: Progress | None = None, checkpoint: Callable[[], None] | None = None) -> dict[str, Any]:
    """Bring the index of ``roots`` in step with the files; a summary of what happened.

    ``checkpoint`` is called between batches (the node's: raise if it is shutting down).
    """
    started = time.perf_counter()
    cap = min(options.max_file_bytes, target.max_document_bytes)
    seen = unchanged = 0
    skipped: Counter[str] = Counter()
    summaries: list[dict[str, Any]] = []
    resolved: list[str] = []
    for root in roots:
        found = walk(root, cap, options.exclude)
        resolved.append(found.root)
        skipped.update(found.skipped)
        if "missing" in found.skipped or "not_a_file" in found.skipped:
            # Not "everything was deleted": an unmounted disk must not retire a whole index.
            log.warning("index: %s is not a folder or a file; left as indexed", found.root)
            continue
        known = target.known_files(options.namespace, found.root)
        seen += len(found.files)
        stale = [entry for entry in found.files if not _unchanged(entry, known)]
        unchanged += len(found.files) - len(stale)
        present = {entry.path for entry in found.files}
        gone: dict[str, str] = {}
        done = 0
        for batch in _batches(stale, options.batch_bytes):
            if checkpoint is not None:
                checkpoint()
            documents: list[Document] = []
            for entry in batch:
                data = read_file(entry, cap)
                if data is None or is_binary(data):
                    reason = "unreadable" if data is None else "binary"
                    skipped[reason] += 1
                    present.discard(entry.path)
                    gone[entry.path] = reason
                    continue
                documents.append(Document(entry.path, entry.size, entry.mtime_ns, data))
            if documents:
                summaries.append(target.sync_files(options.namespace, documents, {}))
            done += len(batch)
            if progress is not None:
                progress(f"{found.root}: {done}/{len(stale)} changed files synced")
        for path in known:
            if path not in present and path not in gone:
                gone[path] = found.reason_for(path)
        part: dict[str, str] = {}
        size = 0
        for path in sorted(gone):
            part[path] = _retire_reason(gone[path])
            size += len(path) + ENTRY_OVERHEAD
            if size >= REMOVED_BATCH_BYTES:
                summaries.append(_removed(target, options, part, checkpoint))
                part, size = {}, 0
        if part:
            summaries.append(_removed(target, options, part, checkpoint))
    total = merge_summaries(summaries)
    skipped.update(total["files"]["skipped"])
    return {
        "namespace": options.namespace or "default",
        "roots": resolved,
        "files": {"seen": seen, "indexed": total["files"]["indexed"], "unchanged": unchanged,
                  "removed": total["files"]["removed"], "skipped": dict(sorted(skipped.items())),
                  "replaced": total["files"]["replaced"]},
        "chunks": total["chunks"],
        "long_lines": total["long_lines"],
        "seconds": round(time.perf_counter() - started, 3),
    }


def _removed(target: Target, options: IndexOptions, part: dict[str, str],
             checkpoint: Callable[[], None] | None) -> dict[str, Any]:
    if checkpoint is not None:
        checkpoint()
    return target.sync_files(options.namespace, [], part)


def _retire_reason(reason: str) -> str:
    from node.memory.files.sync import RETIRE_REASONS

    return reason if reason in RETIRE_REASONS else "deleted"


def data_dir_exclusions(data_dir: Path) -> tuple[str, ...]:
    """What an index never reads: the node's own data dir."""
    return (os.path.realpath(data_dir),)
