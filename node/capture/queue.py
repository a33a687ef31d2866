"""``<data dir>/capture/queue.jsonl``: transcripts a hook saw and the worker has not stored yet.

A hook appends one JSON line (event, session id, transcript path, time) with one
``write`` on an ``O_APPEND`` descriptor and ``fsync``s it before it exits: once the
host's hook returns, the transcript is either stored or on this list. The worker
removes an entry only after its transcript was ingested; a failure stays, with its
attempt count and last error, for the next run. Every read-modify-write holds
``queue.lock`` (``flock``), so hooks and the worker never interleave.

The file is bounded (``MAX_QUEUE_BYTES``): entries for one transcript are redundant
(ingestion is incremental, by file), so a full queue is first coalesced to one entry
per transcript; only a queue of that many distinct pending transcripts refuses more.
A line that does not parse (a torn append, an edit by hand) is dropped at the next
rewrite and logged; an entry failed ``MAX_ATTEMPTS`` times moves to
``queue.rejected.jsonl`` for a human to look at.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from node.errors import CrystalmeshError
from node.memory import (
    atomic_write,
    ensure_dir,
    file_lock,
    fsync_dir,
    open_nofollow,
    read_bytes,
    write_all,
)

log = logging.getLogger(__name__)

MAX_QUEUE_BYTES = 1024 * 1024  # ~3,000 entries
MAX_ATTEMPTS = 50
MAX_LOG_BYTES = 1024 * 1024
_FIELDS = ("id", "host", "event", "session_id", "transcript_path", "namespace", "at_ms")


class QueueFull(CrystalmeshError):
    """The queue holds as many distinct pending transcripts as it may."""

    code = "capture_queue_full"


@dataclass(frozen=True)
class QueueEntry:
    id: str
    host: str
    event: str
    session_id: str
    transcript_path: str
    namespace: str
    at_ms: int
    attempts: int = 0
    error: str | None = None

    @classmethod
    def new(cls, host: str, event: str, session_id: str, transcript_path: str, namespace: str) -> QueueEntry:
        return cls(os.urandom(8).hex(), host, event, session_id, transcript_path, namespace,
                   int(time.time() * 1000))

    def line(self) -> bytes:
        return (json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    @classmethod
    def parse(cls, line: bytes) -> QueueEntry | None:
        try:
            value = json.loads(line)
            if not isinstance(value, dict):
                return None
            entry = cls(**{name: value[name] for name in _FIELDS},
                        attempts=value.get("attempts", 0), error=value.get("error"))
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        strings = (entry.id, entry.host, entry.event, entry.session_id, entry.transcript_path, entry.namespace)
        if not all(isinstance(item, str) for item in strings) or not isinstance(entry.at_ms, int) \
                or not isinstance(entry.attempts, int):
            return None
        return entry


def capture_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "capture"


def capture_log(data_dir: Path) -> Path:
    """The hooks' and the worker's log (``capture.log``; the previous one kept as ``capture.log.1``)."""
    path = capture_dir(data_dir) / "capture.log"
    try:
        if path.stat().st_size > MAX_LOG_BYTES:
            os.replace(path, path.with_name("capture.log.1"))
    except OSError:
        pass
    return path


class CaptureQueue:
    def __init__(self, data_dir: Path) -> None:
        self.directory = capture_dir(data_dir)
        self.path = self.directory / "queue.jsonl"
        self.lock_path = self.directory / "queue.lock"
        self.drain_lock_path = self.directory / "drain.lock"
        self.rejected_path = self.directory / "queue.rejected.jsonl"

    def pending(self) -> bool:
        """Anything queued (a stat, no lock: a hint for whether to start a worker)."""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    def worker_running(self) -> bool:
        """Whether a drain worker holds ``drain.lock`` now. Asked after an append: a worker that
        holds it looks at the queue again once it lets go, so the new entry is served."""
        if not self.drain_lock_path.exists():
            return False
        with file_lock(self.drain_lock_path, blocking=False) as free:
            return not free

    def append(self, entry: QueueEntry) -> None:
        """Add ``entry`` durably (on disk when this returns); coalesces a full queue first."""
        line = entry.line()
        ensure_dir(self.directory)
        with file_lock(self.lock_path):
            created = not self.path.exists()
            fd = open_nofollow(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                size = os.fstat(fd).st_size
                if size + len(line) <= MAX_QUEUE_BYTES:
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        line = b"\n" + line  # a torn last line stays alone on its line
                    write_all(fd, line)
                    os.fsync(fd)
                    if created:
                        fsync_dir(self.directory)
                    return
            finally:
                os.close(fd)
            entries = _coalesce([*self._read_locked(), entry])
            body = b"".join(item.line() for item in entries)
            if len(body) > MAX_QUEUE_BYTES:
                raise QueueFull(f"{len(entries)} transcripts are waiting to be stored; "
                                "run `crystalmesh hook drain` and look at capture.log")
            atomic_write(self.path, body)

    def read(self) -> list[QueueEntry]:
        if not self.directory.is_dir():
            return []
        with file_lock(self.lock_path):
            return self._read_locked()

    def _read_locked(self) -> list[QueueEntry]:
        data = read_bytes(self.path, 2 * MAX_QUEUE_BYTES) or b""
        entries = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            entry = QueueEntry.parse(line)
            if entry is None:
                log.warning("capture queue: an unreadable line of %d bytes is dropped", len(line))
            else:
                entries.append(entry)
        return entries

    def settle(self, stored: set[str], failed: dict[str, str]) -> None:
        """Remove the ``stored`` entries; count an attempt (and its error) on the ``failed`` ones."""
        if not stored and not failed:
            return
        ensure_dir(self.directory)
        with file_lock(self.lock_path):
            keep, rejected = [], []
            for entry in self._read_locked():
                if entry.id in stored:
                    continue
                if entry.id in failed:
                    entry = replace(entry, attempts=entry.attempts + 1, error=failed[entry.id][:300])
                    if entry.attempts >= MAX_ATTEMPTS:
                        rejected.append(entry)
                        continue
                keep.append(entry)
            if rejected:
                previous = read_bytes(self.rejected_path, 4 * MAX_QUEUE_BYTES) or b""
                atomic_write(self.rejected_path, previous + b"".join(item.line() for item in rejected))
                log.error("capture queue: %d transcript(s) failed %d times and moved to %s",
                          len(rejected), MAX_ATTEMPTS, self.rejected_path)
            atomic_write(self.path, b"".join(item.line() for item in keep))


def _coalesce(entries: list[QueueEntry]) -> list[QueueEntry]:
    """One entry per (transcript, namespace), the newest; a session end anywhere is kept."""
    newest: dict[tuple[str, str], QueueEntry] = {}
    ended: set[tuple[str, str]] = set()
    for entry in entries:
        key = (entry.transcript_path, entry.namespace)
        if entry.event == "SessionEnd":
            ended.add(key)
        newest[key] = entry
    return [replace(entry, event="SessionEnd") if key in ended else entry for key, entry in newest.items()]
