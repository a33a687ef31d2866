"""The worker's loop: store every queued transcript through a client, remove what was stored.

One worker at a time (``drain.lock``, taken without waiting: a second one exits at
once). Entries for the same transcript are ingested once (ingestion is incremental:
the node knows where it stopped); a ``SessionEnd`` among them also marks the session
boundary. The client is handed in (``open_sink``), opened on first need: the running
node's API client (the node stays the single owner of its database) or the data dir
opened locally. After releasing the lock the worker looks at the queue once more: a
hook that appended while the lock was held and whose own worker found it busy is
served by this one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from node.capture.hook_input import SESSION_END_EVENTS, HookInputRefused, checked_transcript
from node.capture.queue import CaptureQueue, QueueEntry
from node.memory import ensure_dir, file_lock

log = logging.getLogger(__name__)

HOST_FORMATS = {"claude-code": "claude-code", "codex": "codex"}
"""The transcript format each host writes (``memory ingest --transcript --format``)."""


class TranscriptSink(Protocol):
    """What the worker needs of a client (``ApiClient`` and ``LocalNode`` both are one)."""

    def memory_ingest_transcript(self, path: str, *, format: str | None = None,
                                 namespace: str | None = None,
                                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]: ...

    def session_end(self) -> dict[str, Any]: ...


@dataclass
class DrainReport:
    busy: bool = False
    stored: int = 0  # queue entries removed after their transcript was stored
    dropped: int = 0  # entries whose transcript is gone or not readable any more
    failed: int = 0  # entries kept for the next run
    added: int = 0  # turns the ingests added
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _groups(entries: list[QueueEntry]) -> dict[tuple[str, str], list[QueueEntry]]:
    groups: dict[tuple[str, str], list[QueueEntry]] = {}
    for entry in sorted(entries, key=lambda item: item.at_ms):
        groups.setdefault((entry.transcript_path, entry.namespace), []).append(entry)
    return groups


def _drain_once(queue: CaptureQueue, sink: Callable[[], TranscriptSink], data_dir: Path,
                seen: set[str], report: DrainReport) -> bool:
    """Ingest the entries not tried in this run; False when there were none."""
    entries = [entry for entry in queue.read() if entry.id not in seen]
    if not entries:
        return False
    stored: set[str] = set()
    failed: dict[str, str] = {}
    for (path, namespace), items in _groups(entries).items():
        ids = {item.id for item in items}
        seen.update(ids)
        try:
            checked = checked_transcript(path, data_dir)
        except HookInputRefused as refused:
            log.warning("capture: dropping %d entr(ies) for %s: %s", len(items), path, refused)
            stored |= ids
            report.dropped += len(items)
            continue
        try:
            client = sink()
            summary = client.memory_ingest_transcript(str(checked), format=HOST_FORMATS.get(items[0].host),
                                                      namespace=namespace)
            if any(item.event in SESSION_END_EVENTS for item in items):
                client.session_end()
        except Exception as error:  # every failure is kept for the next run
            message = f"{type(error).__name__}: {error}"
            log.error("capture: %s not stored (kept for the next run): %s", path, message)
            failed |= dict.fromkeys(ids, message)
            report.failed += len(items)
            report.errors.append(message[:300])
            continue
        added = summary.get("added", 0)
        report.added += added if isinstance(added, int) else 0
        report.stored += len(items)
        stored |= ids
        log.info("capture: stored %s session=%s added=%s already_stored=%s", path,
                 summary.get("session_id"), summary.get("added"), summary.get("already_stored"))
    queue.settle(stored, failed)
    return True


def drain_queue(queue: CaptureQueue, open_sink: Callable[[], TranscriptSink], data_dir: Path) -> DrainReport:
    """Store what is queued (see the module docstring); each entry is tried once per run."""
    report = DrainReport()
    opened: list[TranscriptSink] = []

    def sink() -> TranscriptSink:
        if not opened:
            opened.append(open_sink())
        return opened[0]

    seen: set[str] = set()
    ensure_dir(queue.directory)
    while True:
        with file_lock(queue.drain_lock_path, blocking=False) as acquired:
            if not acquired:
                report.busy = True
                return report
            while _drain_once(queue, sink, data_dir, seen, report):
                pass
        # Entries appended while the lock was held, by a hook whose own worker found it busy.
        if not any(entry.id not in seen for entry in _quiet_read(queue)):
            return report


def _quiet_read(queue: CaptureQueue) -> list[QueueEntry]:
    with contextlib.suppress(OSError):
        return queue.read()
    return []
