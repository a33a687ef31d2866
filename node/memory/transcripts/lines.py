"""A transcript file read as complete lines, from a byte offset, in bounded memory.

Transcripts are appended to while a session runs, so the reader yields only lines
that end in a newline: a trailing partial line (the host is still writing it) is
left for the next read, and the offset after the last complete line is where the
next read starts. A line over ``MAX_LINE_BYTES`` is never held in memory: it is
yielded as a :class:`Line` without data (skipped, counted) and the reader scans on
to its end. Memory is bounded by ``BLOCK_BYTES`` plus one line of at most
``MAX_LINE_BYTES``, whatever the file's size.

A file is told apart from a replaced one by its :func:`fingerprint`, the hash of its
first line (at most ``FINGERPRINT_BYTES``): an append-only transcript never changes
it, a new file at the same path (or a truncated and rewritten one) almost surely does.

:func:`chunks` packs the lines into pieces of at most ``CHUNK_BYTES`` (what one API
request carries, base64, under the 1 MiB body limit); a piece ends early after a
line too long to send, which the node counts as skipped from ``end_offset``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

MAX_LINE_BYTES = 512 * 1024  # a line longer than this (an inline screenshot, a huge tool dump) is skipped
CHUNK_BYTES = 640 * 1024  # raw bytes per chunk: base64 (4/3) plus the JSON around it stays under 1 MiB
BLOCK_BYTES = 64 * 1024  # read size
FINGERPRINT_BYTES = 4096


@dataclass(frozen=True)
class Line:
    """One complete line: ``[start, end)`` in the file (``end`` past its newline); ``data`` is
    ``None`` for a line over the size limit (not read into memory)."""

    start: int
    end: int
    data: bytes | None


@dataclass(frozen=True)
class Piece:
    """Complete lines ``data`` starting at ``offset``; the file is consumed up to ``end_offset``
    (past ``offset + len(data)`` when the piece ends with one over-long line left out)."""

    offset: int
    data: bytes
    end_offset: int


def read_lines(file: BinaryIO, offset: int = 0, max_line_bytes: int = MAX_LINE_BYTES,
               block_bytes: int = BLOCK_BYTES, limit: int | None = None) -> Iterator[Line]:
    """Every complete line of ``file`` from ``offset`` on, up to byte ``limit`` (the size the file had
    when the caller looked: what the host appends meanwhile is for the next read)."""
    file.seek(offset)
    buffer = bytearray()
    start = offset  # file position of buffer[0]
    position = offset  # file position of the next byte read
    long_line_start: int | None = None  # inside a line over the limit: its bytes are dropped as they come
    while True:
        size = block_bytes if limit is None else min(block_bytes, limit - position)
        block = file.read(size) if size > 0 else b""
        if not block:
            return
        position += len(block)
        buffer += block
        cut = 0
        while (newline := buffer.find(b"\n", cut)) >= 0:
            end = start + newline + 1
            if long_line_start is not None:
                yield Line(long_line_start, end, None)
                long_line_start = None
            elif newline - cut > max_line_bytes:
                yield Line(start + cut, end, None)
            else:
                yield Line(start + cut, end, bytes(buffer[cut:newline + 1]))
            cut = newline + 1
        del buffer[:cut]
        start += cut
        if long_line_start is None and len(buffer) > max_line_bytes:
            long_line_start = start
        if long_line_start is not None:
            start += len(buffer)
            buffer.clear()


def fingerprint(file: BinaryIO) -> str:
    """sha256 (hex) of the file's first line, at most ``FINGERPRINT_BYTES`` of it."""
    file.seek(0)
    head = file.read(FINGERPRINT_BYTES)
    newline = head.find(b"\n")
    return hashlib.sha256(head if newline < 0 else head[:newline + 1]).hexdigest()


def chunks(file: BinaryIO, offset: int = 0, chunk_bytes: int = CHUNK_BYTES,
           max_line_bytes: int = MAX_LINE_BYTES, limit: int | None = None) -> Iterator[Piece]:
    """The complete lines from ``offset`` on, packed into pieces of at most ``chunk_bytes``."""
    if chunk_bytes <= max_line_bytes:
        raise ValueError("a chunk must hold the longest line kept")
    parts: list[bytes] = []
    size = 0
    start = offset
    for line in read_lines(file, offset, max_line_bytes, limit=limit):
        if line.data is not None and size + len(line.data) > chunk_bytes:
            yield Piece(start, b"".join(parts), line.start)
            parts, size, start = [], 0, line.start
        if line.data is None:  # over the limit: ends the piece, the node counts it from end_offset
            yield Piece(start, b"".join(parts), line.end)
            parts, size, start = [], 0, line.end
            continue
        parts.append(line.data)
        size += len(line.data)
    if parts:
        yield Piece(start, b"".join(parts), start + size)


def split_lines(data: bytes) -> list[bytes]:
    """A piece's lines, each without its newline (the piece ends with one, or is empty)."""
    return data.split(b"\n")[:-1] if data else []
