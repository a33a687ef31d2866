"""``crystalmesh backup`` and ``restore``: a whole node in one encrypted file, and back.

What a backup holds: each database as SQLite's online backup API copies it (a
consistent snapshot, taken while the node runs and writes: in WAL mode the copy
reads one snapshot and blocks no writer), the secret files (identity and wallet
keys, API token), ``node.toml``, the saved peers and working memory (MEMORY.md,
the scratch WAL, a pending dream journal). Not the HNSW index (a cache of the
store, rebuilt on the restored node's first start) nor runtime files and logs.

Written as a tar stream into :class:`node.ops.archive.EncryptingWriter`, to a
temporary file beside the target, fsynced, then renamed over it: a kill at any
point leaves the previous backup and the node as they were.

Restore treats the archive as hostile: everything is decrypted and authenticated
first, into a temporary directory beside the target; members are regular files
under the names a backup writes (no absolute path, no ``..``, no link), within
count and size limits; the restored databases must pass ``quick_check``; only
then does the directory move into place with one rename. A non-empty target is
refused, so a restore never mixes with another node's files.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node.db import integrity_problems
from node.errors import CrystalmeshError
from node.ops.archive import BackupRefused, EncryptingWriter, decrypt
from node.ops.doctor import STORE_FILES

FORMAT = 1
STAGING_PREFIX = ".crystalmesh-backup-"
MANIFEST = "manifest.json"
# Files of a data dir a backup carries as they are (besides the database snapshots).
PLAIN_FILES = ("node.toml", "identity.key", "wallet.key", "api.token", "peers.json", "audit.jsonl")
WORKING_FILES = ("MEMORY.md", "scratch.md", "scratch.rejected.md", "dream.journal", "MEMORY.md.seed-backup")
# The x402 SDK's channel records (node.chain.x402_channels): the latest voucher of each channel
# paying this node over HTTP, which is money until claimed.
CHANNEL_RECORDS = ("x402-channels", "server")
_CHANNEL_RECORD = re.compile(r"^0x[0-9a-f]{64}\.json$")
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 << 30
MAX_TOTAL_BYTES = 256 << 30
_NAMESPACE = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")

Progress = Callable[[str], None]


class BackupFailed(CrystalmeshError, RuntimeError):
    """A backup could not be taken (nothing was replaced)."""


def _quiet(_: str) -> None:
    pass


def _allowed(name: str) -> bool:
    """Whether ``name`` is a member a backup writes (the restore's allow-list)."""
    if name in (MANIFEST, *PLAIN_FILES, *STORE_FILES):
        return True
    parts = name.split("/")
    if len(parts) == 3 and tuple(parts[:2]) == CHANNEL_RECORDS:
        return bool(_CHANNEL_RECORD.match(parts[2]))
    return (len(parts) == 3 and parts[0] == "memory" and bool(_NAMESPACE.match(parts[1]))
            and parts[1] not in (".", "..") and parts[2] in WORKING_FILES)


def _members(data_dir: Path) -> list[str]:
    names = [name for name in PLAIN_FILES if (data_dir / name).is_file()]
    memory = data_dir / "memory"
    if memory.is_dir():
        for namespace in sorted(memory.iterdir()):
            if namespace.is_dir() and not namespace.is_symlink():
                names += [f"memory/{namespace.name}/{file}" for file in WORKING_FILES
                          if (namespace / file).is_file() and not (namespace / file).is_symlink()]
    records = data_dir.joinpath(*CHANNEL_RECORDS)
    if records.is_dir() and not records.is_symlink():
        names += ["/".join((*CHANNEL_RECORDS, path.name)) for path in sorted(records.iterdir())
                  if path.is_file() and not path.is_symlink()]
    return [name for name in names if _allowed(name)]


def _snapshot(source: Path, target: Path) -> int:
    """SQLite's online backup of ``source`` into ``target``; returns its pages."""
    src = sqlite3.connect(source.absolute().as_uri() + "?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)  # all pages in one step: one consistent snapshot, however busy the writer
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file in the archive
        problems = integrity_problems(dst)
        if problems:
            raise BackupFailed(f"{source} is damaged ({'; '.join(problems[:3])}); "
                               f"repair it first (`crystalmesh doctor --repair`)")
        return int(dst.execute("PRAGMA page_count").fetchone()[0])
    finally:
        dst.close()
        src.close()


def take_backup(data_dir: Path, out: Path, passphrase: bytes, progress: Progress = _quiet,
                peer_id: str | None = None) -> dict[str, Any]:
    """Write the encrypted backup of ``data_dir`` to ``out`` (atomically replaced)."""
    if not (data_dir / "node.toml").is_file():
        raise BackupFailed(f"{data_dir} is not a data dir (no node.toml)")
    out = out.expanduser().absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    files: list[dict[str, Any]] = []
    _remove_stale_staging(out.parent)
    with tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=out.parent) as staging_name:
        staging = Path(staging_name)
        temporary = staging / "archive"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            writer = EncryptingWriter(handle, passphrase)
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for name in STORE_FILES:
                    if not (data_dir / name).is_file():
                        continue
                    copy = staging / name
                    pages = _snapshot(data_dir / name, copy)
                    tar.add(copy, arcname=name, recursive=False)
                    files.append({"name": name, "bytes": copy.stat().st_size})
                    progress(f"{name}: snapshot of {pages} pages ({copy.stat().st_size} bytes)")
                    copy.unlink()
                for name in _members(data_dir):
                    data = (data_dir / name).read_bytes()
                    _add_bytes(tar, name, data)
                    files.append({"name": name, "bytes": len(data)})
                progress(f"keys, node.toml and working memory: {len(files)} files in all")
                manifest = {"format": FORMAT, "created_at_s": int(time.time()), "peer_id": peer_id,
                            "files": files}
                _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1).encode())
            writer.close()
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, out)  # the commit point: the previous backup stays until here
        _fsync_dir(out.parent)
    progress(f"written {out} ({out.stat().st_size} bytes, {time.monotonic() - started:.1f} s)")
    return {"file": str(out), "bytes": out.stat().st_size, "files": files, "peer_id": peer_id}


def _remove_stale_staging(directory: Path) -> None:
    """Remove what a backup killed mid-way left beside its file (its process is gone)."""
    for path in directory.glob(f"{STAGING_PREFIX}*-*"):
        match = re.fullmatch(re.escape(STAGING_PREFIX) + r"(\d+)-.*", path.name)
        if match is None or not path.is_dir() or path.is_symlink():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (PermissionError, OverflowError):
            continue  # alive under another user, or not a pid: not ours to remove


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def restore_backup(archive: Path, target: Path, passphrase: bytes,
                   progress: Progress = _quiet) -> dict[str, Any]:
    """Restore ``archive`` into ``target`` (absent or empty); nothing is written unless all of
    it decrypts, authenticates and checks."""
    target = target.expanduser().absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupRefused(f"{target} is not empty; restore into a new data dir")
    if not archive.is_file():
        raise BackupRefused(f"{archive} does not exist")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.restore-", dir=target.parent))
    try:
        plain = staging / "archive.tar"
        with open(archive, "rb") as source, open(plain, "xb") as sink:
            total = 0
            for chunk in decrypt(source, passphrase, archive.name):
                total += len(chunk)
                if total > MAX_TOTAL_BYTES:
                    raise BackupRefused(f"{archive.name} holds more than {MAX_TOTAL_BYTES} bytes")
                sink.write(chunk)
        progress(f"{archive.name}: decrypted and authenticated ({total} bytes)")
        data = staging / "data"
        data.mkdir(mode=0o700)
        manifest = _extract(plain, data, archive.name)
        plain.unlink()
        for name in STORE_FILES:
            if (data / name).exists():
                conn = sqlite3.connect(data / name)
                try:
                    problems = integrity_problems(conn)
                    conn.execute("PRAGMA journal_mode=WAL")
                finally:
                    conn.close()
                if problems:
                    raise BackupRefused(f"{archive.name}: {name} in it is damaged ({problems[0]})")
        for required in ("node.toml", "identity.key", "wallet.key"):
            if not (data / required).is_file():
                raise BackupRefused(f"{archive.name} holds no {required}: not a node's backup")
        if target.exists():
            target.rmdir()
        os.replace(data, target)  # the commit point: before it, nothing of the backup is in place
        _fsync_dir(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    progress(f"restored into {target}")
    return {"data_dir": str(target), "files": manifest.get("files", []),
            "peer_id": manifest.get("peer_id"), "created_at_s": manifest.get("created_at_s")}


def _extract(plain: Path, data: Path, name: str) -> dict[str, Any]:
    """Every member into ``data``, by the allow-list; returns the manifest."""
    seen: set[str] = set()
    manifest: dict[str, Any] | None = None
    try:
        with tarfile.open(plain, mode="r:") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise BackupRefused(f"{name} holds more than {MAX_MEMBERS} files")
                if not member.isreg() or not _allowed(member.name) or member.name in seen:
                    raise BackupRefused(f"{name} holds {member.name!r}, which no backup writes")
                if member.size > MAX_MEMBER_BYTES:
                    raise BackupRefused(f"{name}: {member.name} is larger than {MAX_MEMBER_BYTES} bytes")
                seen.add(member.name)
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise BackupRefused(f"{name}: {member.name} cannot be read")
                if member.name == MANIFEST:
                    manifest = json.loads(extracted.read(1 << 20))
                    continue
                path = data / member.name
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(extracted, out, 1 << 20)
    except (tarfile.TarError, ValueError, OSError) as exc:
        if isinstance(exc, BackupRefused):
            raise
        raise BackupRefused(f"{name}: its contents are not a backup ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupRefused(f"{name} has no manifest of format {FORMAT}")
    return manifest
