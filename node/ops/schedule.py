"""Scheduled backups: ``[backup] every_hours`` with ``keep`` newest files kept.

The schedule counts from the newest backup file in the directory, not from the
node's start, so a node restarted every hour still backs up every
``every_hours``. Files are ``<data dir name>-<UTC time>.cmbackup``; each is
written atomically (node.ops.backup), and only files of that pattern are ever
pruned.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from pathlib import Path

import trio

from node import metrics
from node.config import ConfigError, NodeConfig
from node.ops.backup import take_backup

log = logging.getLogger(__name__)

_STAMP = "%Y%m%dT%H%M%SZ"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"-\d{8}T\d{6}Z\.cmbackup")


def scheduled_backups(directory: Path, name: str) -> list[Path]:
    """The scheduled backups of ``name`` in ``directory``, oldest first (by their time stamp)."""
    if not directory.is_dir():
        return []
    pattern = _pattern(name)
    return sorted(path for path in directory.iterdir() if pattern.fullmatch(path.name))


def prune(directory: Path, name: str, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest scheduled backups; returns the deleted files."""
    backups = scheduled_backups(directory, name)
    doomed = backups[:-keep] if keep > 0 else backups
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def passphrase_for(config: NodeConfig) -> bytes:
    """The scheduled backups' passphrase; a schedule without one is a configuration error."""
    value = os.environ.get(config.backup.passphrase_env, "")
    if not value:
        raise ConfigError(
            f"backup.every_hours = {config.backup.every_hours} but ${config.backup.passphrase_env} "
            f"is empty: set it (backup.passphrase_env names it) or set backup.every_hours = 0")
    return value.encode()


async def run_scheduled_backups(config: NodeConfig, passphrase: bytes, peer_id: str) -> None:
    """Back up every ``backup.every_hours`` into ``config.backup_dir``, keeping ``backup.keep``."""
    directory, name = config.backup_dir, config.data_dir.name
    interval_s = config.backup.every_hours * 3600
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        existing = scheduled_backups(directory, name)
        newest_s = existing[-1].stat().st_mtime if existing else None
        if newest_s is not None:
            await trio.sleep(max(0.0, newest_s + interval_s - time.time()))
        path = directory / f"{name}-{time.strftime(_STAMP, time.gmtime())}.cmbackup"
        if path.exists():  # a second within the same second: wait for the next stamp
            await trio.sleep(1.0)
            continue
        await trio.to_thread.run_sync(functools.partial(
            take_backup, config.data_dir, path, passphrase, peer_id=peer_id))
        metrics.LAST_BACKUP.set(time.time())
        deleted = prune(directory, name, config.backup.keep)
        log.info("scheduled backup written path=%s pruned=%d", path, len(deleted))
