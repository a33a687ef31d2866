"""What a SQLite write-ahead log holds, read without opening the database.

SQLite documents the WAL format (https://sqlite.org/fileformat2.html#walformat):
a 32-byte header (magic, version, page size, checkpoint sequence, two salts, a
checksum), then frames of a 24-byte header (page number, database size after a
commit or 0, the salts, a cumulative checksum) and one page. A frame counts only
if its salts match the header and its checksum continues the chain; only frames
up to the last valid commit frame are ever read. Anything after is a torn or
unfinished transaction (a process killed mid-write) that SQLite drops on open,
or frames of an older generation left behind after a checkpoint reset the log.

Read here, before any connection opens the file, because the first connection
to open it replays and may checkpoint the log: afterwards there is nothing left
to account for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24
MAGIC_LITTLE = 0x377F0682
MAGIC_BIG = 0x377F0683
MAX_WAL_BYTES = 1 << 30  # a log this large is reported, not read


@dataclass(frozen=True)
class WalReport:
    """One ``-wal`` file: committed transactions in it, and what SQLite will drop."""

    path: Path
    size_bytes: int
    page_size: int = 0
    committed_frames: int = 0
    transactions: int = 0
    uncommitted_frames: int = 0  # valid frames after the last commit: a transaction cut short
    torn_bytes: int = 0  # bytes after the valid frames with this generation's salts or a partial frame
    problem: str | None = None  # a header SQLite will not use (the whole log is ignored)

    @property
    def torn(self) -> bool:
        return self.uncommitted_frames > 0 or self.torn_bytes > 0 or self.problem is not None

    def describe(self) -> str:
        if self.size_bytes == 0:
            return "empty"
        if self.problem:
            return f"{self.size_bytes} bytes; {self.problem}: SQLite ignores the whole log"
        text = (f"{self.transactions} committed transaction(s) in {self.committed_frames} frame(s) "
                f"not yet checkpointed")
        if self.uncommitted_frames:
            text += (f"; {self.uncommitted_frames} frame(s) of an unfinished transaction "
                     f"(dropped on open: it never committed)")
        if self.torn_bytes:
            text += f"; a torn tail of {self.torn_bytes} byte(s) (dropped on open)"
        return text


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    for index in range(0, len(words), 2):
        s0 = (s0 + words[index] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[index + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def read_wal(path: Path) -> WalReport:
    """Account for ``path`` (a ``-wal`` file) frame by frame."""
    size = path.stat().st_size
    if size == 0:
        return WalReport(path, 0)
    if size > MAX_WAL_BYTES:
        return WalReport(path, size, problem=f"larger than {MAX_WAL_BYTES} bytes, not read")
    data = path.read_bytes()
    if size < HEADER_BYTES:
        return WalReport(path, size, problem="shorter than a WAL header")
    magic, _version, page_size, _seq, salt1, salt2, check1, check2 = struct.unpack(">8I", data[:32])
    if magic not in (MAGIC_LITTLE, MAGIC_BIG):
        return WalReport(path, size, problem="bad magic number")
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        return WalReport(path, size, problem=f"bad page size {page_size}")
    big_endian = magic == MAGIC_BIG
    s0, s1 = _checksum(data[:24], big_endian, 0, 0)
    if (s0, s1) != (check1, check2):
        return WalReport(path, size, page_size, problem="header checksum mismatch")
    frame_bytes = FRAME_HEADER_BYTES + page_size
    offset = HEADER_BYTES
    valid = committed = transactions = 0
    current_generation_tail = 0
    while offset + frame_bytes <= size:
        header = data[offset:offset + FRAME_HEADER_BYTES]
        _page, commit_size, frame_salt1, frame_salt2, frame_check1, frame_check2 = struct.unpack(">6I", header)
        if (frame_salt1, frame_salt2) != (salt1, salt2):
            break  # an older generation's frame: the log ends here, nothing torn
        t0, t1 = _checksum(header[:8], big_endian, s0, s1)
        t0, t1 = _checksum(data[offset + FRAME_HEADER_BYTES:offset + frame_bytes], big_endian, t0, t1)
        if (t0, t1) != (frame_check1, frame_check2):
            current_generation_tail = size - offset  # this generation, bad checksum: torn
            break
        s0, s1 = t0, t1
        valid += 1
        offset += frame_bytes
        if commit_size:
            committed, transactions = valid, transactions + 1
    else:
        current_generation_tail = size - offset  # a partial frame at the end
    return WalReport(
        path, size, page_size, committed_frames=committed, transactions=transactions,
        uncommitted_frames=valid - committed, torn_bytes=current_generation_tail,
    )
