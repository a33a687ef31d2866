"""The scratch buffer: working memory's write-ahead log (seed 001, ``memory/scratch.md``).

One note per line, in the seed's format, followed by an id and a checksum::

    - [2026-03-12T14:30:00Z] (importance: 0.8) User's name is Douglas <!-- wm:3f9c0a1b2c3d4e5f:1a2b3c4d -->

An append is one ``write`` of one whole line on an ``O_APPEND`` descriptor,
then ``fsync``: a note is on disk before ``append`` returns. A process killed
mid-write can leave at most a torn last line without its newline; readers
ignore it (it was never acknowledged) and the next append cuts it off. Lines
whose checksum does not match are reported as corrupt and never consumed as
notes. Every operation holds ``scratch.lock`` (``flock``), so concurrent
callers, threads or processes, never interleave.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from node.errors import CrystalmeshError
from node.memory.working.durable import (
    atomic_write,
    ensure_dir,
    file_lock,
    fsync_dir,
    open_nofollow,
    read_bytes,
    write_all,
)

log = logging.getLogger(__name__)

HEADER = "# Scratch Buffer (Working Memory WAL)\n\n"
MAX_NOTE_CHARS = 4000
MAX_SCRATCH_BYTES = 8 * 1024 * 1024
AUTO_PREFIX = "[AUTO]"
DEFAULT_IMPORTANCE = 0.7
_LINE = re.compile(
    r"^- \[(?P<at>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)\] \(importance: (?P<importance>[01](?:\.\d{1,3})?)\) "
    r"(?P<text>.+) <!-- wm:(?P<id>[0-9a-f]{16}):(?P<crc>[0-9a-f]{8}) -->$"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


class NoteRejected(CrystalmeshError, ValueError):
    """A note that cannot be written (empty, too long, importance out of range)."""


@dataclass(frozen=True)
class ScratchNote:
    id: str
    at: str  # ISO-8601 UTC, seconds
    importance: float
    text: str

    @property
    def auto(self) -> bool:
        return self.text.startswith(AUTO_PREFIX)

    @property
    def at_ms(self) -> int:
        return int(datetime.strptime(self.at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() * 1000)

    def seed_line(self) -> str:
        """The note as the seed shows it to an agent (no id, no checksum)."""
        return f"- [{self.at}] (importance: {_importance_text(self.importance)}) {self.text}"

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "at": self.at, "importance": self.importance, "text": self.text,
                "auto": self.auto}


@dataclass
class ScratchContents:
    notes: list[ScratchNote] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    torn_tail: bool = False


def _importance_text(importance: float) -> str:
    text = f"{importance:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _checksum(note_id: str, at: str, importance: str, text: str) -> str:
    return f"{zlib.crc32(f'{note_id}|{at}|{importance}|{text}'.encode()):08x}"


def clean_note_text(text: str) -> str:
    """One line of visible text: line breaks and control characters become spaces."""
    return " ".join(_CONTROL.sub(" ", text).split())


def validate_note(text: str, importance: float) -> tuple[str, float]:
    """The note as it will be stored, or ``NoteRejected`` naming the problem."""
    if not isinstance(text, str):
        raise NoteRejected("note must be text")
    cleaned = clean_note_text(text)
    try:
        cleaned.encode("utf-8")
    except UnicodeEncodeError as error:
        raise NoteRejected("note is not valid Unicode text (lone surrogate)") from error
    if not cleaned:
        raise NoteRejected("note is empty")
    if len(cleaned) > MAX_NOTE_CHARS:
        raise NoteRejected(f"note is longer than {MAX_NOTE_CHARS} characters")
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise NoteRejected("importance must be a number between 0 and 1")
    if not 0.0 <= float(importance) <= 1.0:
        raise NoteRejected(f"importance must be between 0 and 1, got {importance}")
    return cleaned, round(float(importance), 3)


def format_line(note: ScratchNote) -> str:
    importance = _importance_text(note.importance)
    crc = _checksum(note.id, note.at, importance, note.text)
    return f"{note.seed_line()} <!-- wm:{note.id}:{crc} -->\n"


def parse_line(line: str) -> ScratchNote | None:
    """A note from one stored line, or None if the line is not an intact note."""
    match = _LINE.match(line)
    if match is None:
        return None
    at, importance, text, note_id = match["at"], match["importance"], match["text"], match["id"]
    if _checksum(note_id, at, importance, text) != match["crc"]:
        return None
    value = float(importance)
    if not 0.0 <= value <= 1.0:
        return None
    return ScratchNote(note_id, at, value, text)


def parse(data: bytes) -> ScratchContents:
    contents = ScratchContents()
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    # A last line without its newline is a torn append: never acknowledged, ignored.
    if lines and lines[-1] != "":
        contents.torn_tail = True
    for line in lines[:-1]:
        if not line.strip() or line.startswith("#"):
            continue
        note = parse_line(line)
        if note is None:
            contents.corrupt.append(line[:200])
        else:
            contents.notes.append(note)
    return contents


parse_scratch = parse  # its name outside working memory (``crystalmesh doctor``)


def utc_now_iso(at_ms: int | None = None) -> str:
    moment = datetime.now(UTC) if at_ms is None else datetime.fromtimestamp(at_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ScratchBuffer:
    """``<dir>/scratch.md`` with its lock; see the module docstring for the guarantees."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "scratch.md"
        self.lock_path = directory / "scratch.lock"
        self.rejected_path = directory / "scratch.rejected.md"

    @contextmanager
    def locked(self) -> Iterator[None]:
        ensure_dir(self.directory)
        with file_lock(self.lock_path):
            yield

    def new_note(self, text: str, importance: float = DEFAULT_IMPORTANCE,
                 at_ms: int | None = None) -> ScratchNote:
        cleaned, value = validate_note(text, importance)
        return ScratchNote(os.urandom(8).hex(), utc_now_iso(at_ms), value, cleaned)

    def append_locked(self, note: ScratchNote) -> None:
        """Append one note durably; the caller holds ``locked()``."""
        line = format_line(note).encode("utf-8")
        created = not self.path.exists()
        fd = open_nofollow(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size + len(line) > MAX_SCRATCH_BYTES:
                raise NoteRejected("the scratch buffer is full; run `crystalmesh memory dream`")
            if size == 0:
                line = HEADER.encode() + line
            else:
                self._cut_torn_tail(fd, size)
            write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.directory)

    @staticmethod
    def _cut_torn_tail(fd: int, size: int) -> None:
        last = os.pread(fd, 1, size - 1)
        if last == b"\n":
            return
        # A torn append (its writer died before fsync returned): cut back to the last newline.
        start = max(0, size - MAX_NOTE_CHARS * 4 - 512)
        tail = os.pread(fd, size - start, start)
        keep = start + tail.rfind(b"\n") + 1 if b"\n" in tail else start
        log.warning("scratch: cutting a torn line of %d bytes", size - keep)
        os.ftruncate(fd, keep)

    def read_locked(self) -> ScratchContents:
        data = read_bytes(self.path, MAX_SCRATCH_BYTES)
        contents = parse(data or b"")
        if contents.corrupt:
            log.warning("scratch: %d corrupt line(s) ignored in %s", len(contents.corrupt), self.path)
        return contents

    def read(self) -> ScratchContents:
        with self.locked():
            return self.read_locked()

    def remove_locked(self, consumed: Iterable[str]) -> int:
        """Rewrite the buffer without the notes in ``consumed`` (atomic replace).

        Corrupt lines move to ``scratch.rejected.md`` so they are kept for a human
        but never shown to an agent or consumed again. Returns notes removed.
        """
        gone = set(consumed)
        contents = self.read_locked()
        keep = [note for note in contents.notes if note.id not in gone]
        removed = len(contents.notes) - len(keep)
        if not removed and not contents.corrupt and not contents.torn_tail:
            return 0
        if contents.corrupt:
            previous = read_bytes(self.rejected_path, MAX_SCRATCH_BYTES) or b""
            atomic_write(self.rejected_path,
                         previous + "".join(line + "\n" for line in contents.corrupt).encode())
        body = HEADER + "".join(format_line(note) for note in keep)
        atomic_write(self.path, body.encode("utf-8"))
        return removed
