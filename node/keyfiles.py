"""Secret files (identity key, wallet key, API token): created 0600, never world-readable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from node.errors import CrystalmeshError


class KeyFileError(CrystalmeshError, RuntimeError):
    """A secret file is unreadable, malformed or readable by other users."""


def write_secret(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600 from the first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def read_secret(path: Path) -> bytes:
    """Read a secret file, refusing one that group or others can read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError as exc:
        raise KeyFileError(f"{path} does not exist (run `crystalmesh init`)") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"{path} is readable by other users (mode {oct(mode & 0o777)}); chmod 600 it")
    return path.read_bytes()
