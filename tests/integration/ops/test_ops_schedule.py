"""Issue 30: scheduled backups (``[backup] every_hours``, ``keep``): written on schedule, the
oldest pruned, each one a restorable node; a schedule without its passphrase is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from node.config import ConfigError, load_config
from node.init import init_node
from node.keys import load_identity
from node.ops import passphrase_for, prune, restore_backup, run_scheduled_backups, scheduled_backups
from tests.support.wait import wait_until_async

PASSPHRASE = b"scheduled backups passphrase"


def test_prune_keeps_the_newest_and_touches_nothing_else(tmp_path: Path) -> None:
    names = [f"node-2026110{day}T010203Z.cmbackup" for day in range(1, 6)]
    for name in [*names, "node-manual.cmbackup", "other-20261101T010203Z.cmbackup", "node-x.txt"]:
        (tmp_path / name).write_bytes(b"x")
    deleted = prune(tmp_path, "node", keep=2)
    assert [p.name for p in deleted] == names[:3]
    assert [p.name for p in scheduled_backups(tmp_path, "node")] == names[3:]
    assert (tmp_path / "node-manual.cmbackup").exists() and (tmp_path / "other-20261101T010203Z.cmbackup").exists()


def test_a_schedule_without_its_passphrase_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    init_node(tmp_path / "node", name="node", embedder="hashing")
    config = load_config(tmp_path / "node", environ={}, overrides={"backup": {"every_hours": 24}})
    monkeypatch.delenv("CM_BACKUP_PASSPHRASE", raising=False)
    with pytest.raises(ConfigError, match="CM_BACKUP_PASSPHRASE"):
        passphrase_for(config)
    monkeypatch.setenv("CM_BACKUP_PASSPHRASE", "set")
    assert passphrase_for(config) == b"set"


@pytest.mark.trio
async def test_scheduled_backups_are_written_and_pruned(tmp_path: Path) -> None:
    init_node(tmp_path / "node", name="node", embedder="hashing")
    config = load_config(tmp_path / "node", environ={},
                         overrides={"backup": {"every_hours": 1 / 3600, "keep": 2,
                                               "directory": str(tmp_path / "backups")}})
    peer_id = load_identity(config).peer_id
    seen: set[str] = set()

    async def pruned() -> bool:
        current = {path.name for path in scheduled_backups(config.backup_dir, "node")}
        seen.update(current)
        return len(seen) >= 3 and len(current) == 2

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_scheduled_backups, config, PASSPHRASE, peer_id)
        await wait_until_async(pruned, 30, "a third scheduled backup and the first pruned")
        nursery.cancel_scope.cancel()
    newest = scheduled_backups(config.backup_dir, "node")[-1]
    summary = restore_backup(newest, tmp_path / "restored", PASSPHRASE)
    assert summary["peer_id"] == peer_id
    assert load_identity(load_config(tmp_path / "restored", environ={})).peer_id == peer_id
    assert not [p for p in config.backup_dir.iterdir() if p.name.startswith(".")]
