"""Durable file writes for working memory: appends and replacements that survive kill -9.

Every write here is either complete on disk when the function returns (data and
directory entry fsynced) or not visible at all. Paths are opened with
``O_NOFOLLOW`` so a symlink planted in the data dir cannot redirect a write.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from node.errors import CrystalmeshError

FILE_MODE = 0o600
DIR_MODE = 0o700


def ensure_dir(path: Path) -> None:
    """Create ``path`` (0700) and make its entry durable; neither it nor its parent may be a link."""
    for candidate in (path, path.parent):
        if candidate.is_symlink():
            raise UnsafeFile(f"{candidate} is a symlink; working memory does not follow links")
    if path.is_dir():
        return
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory."""
    temp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    fd = open_nofollow(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)


def read_bytes(path: Path, limit: int) -> bytes | None:
    """The file's bytes (None if missing); refuses symlinks and files over ``limit`` bytes."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OversizeFile(f"{path} is {size} bytes, more than the {limit} allowed")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(len(c) for c in chunks) > limit:
                raise OversizeFile(f"{path} grew beyond {limit} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


class UnsafeFile(CrystalmeshError, OSError):
    """A working-memory file that is a symlink or larger than any this node writes: refused."""

    http_status = 409
    code = "unsafe_file"


class OversizeFile(UnsafeFile):
    """A working-memory file larger than any this node writes: refused, not read."""


def open_nofollow(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    """``os.open`` with ``O_NOFOLLOW``; a symlink in ``path``'s place is ``UnsafeFile``."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symlink; working memory does not follow links") from error
        raise


@contextlib.contextmanager
def file_lock(path: Path, blocking: bool = True) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (created 0600); yields False if busy and not blocking.

    ``flock`` belongs to the open file description, so two opens in one process
    exclude each other just like two processes do: threads and processes share one rule.
    """
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
