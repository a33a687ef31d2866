"""Issue 30, backup and restore through the real CLI: a backup restores to the same node; a
tampered, truncated or wrongly-unlocked file, or a hostile archive, is refused with one
error line and nothing written; kill -9 during a backup leaves the previous one intact."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from node.ops.archive import HEADER_BYTES, MAGIC, EncryptingWriter
from tests.support.cli import Cli

REPO = Path(__file__).resolve().parents[3]
PASSPHRASE = "correct horse battery staple"

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def node(initialised: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("CM_PASS", PASSPHRASE)
    for number in range(12):
        initialised.json("memory", "add", f"runbook {number}: restart the queue worker {number} after a deploy")
    initialised.json("memory", "note", "the on-call rota changes on Mondays")
    return initialised


def backup(cli: Cli, archive: Path) -> dict[str, object]:
    result: dict[str, object] = cli.json("backup", "--to", str(archive), "--passphrase-env", "CM_PASS")
    return result


def restore(cli: Cli, archive: Path, target: Path) -> tuple[int, str, str]:
    return cli.run("restore", str(archive), "--data-dir", str(target), "--passphrase-env", "CM_PASS")


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


# An x402 channel record (the latest voucher paying this node over HTTP): money until claimed.
CHANNEL_RECORD = Path("x402-channels", "server", "0x" + "ab" * 32 + ".json")


def test_backup_restores_the_same_node(node: Cli, tmp_path: Path) -> None:
    (node.data_dir / CHANNEL_RECORD).parent.mkdir(parents=True)
    (node.data_dir / CHANNEL_RECORD).write_text('{"channelId": "0x' + "ab" * 32 + '"}\n')
    (node.data_dir / CHANNEL_RECORD).with_name("notes.txt").write_text("not a record")
    archive = tmp_path / "node.cmbackup"
    summary = backup(node, archive)
    assert archive.stat().st_mode & 0o777 == 0o600
    assert MAGIC in archive.read_bytes()[:16] and b"runbook" not in archive.read_bytes()
    target = tmp_path / "restored"
    code, _, err = restore(node, archive, target)
    assert code == 0, err
    restored = Cli(node.capsys, target)
    original = node.json("init")
    again = restored.json("init")  # already initialised: reports the node's identity
    assert (again["peer_id"], again["wallet_address"]) == (original["peer_id"], original["wallet_address"])
    assert again["peer_id"] == summary["peer_id"]
    for key in ("identity.key", "wallet.key", "api.token"):
        assert (target / key).read_bytes() == (node.data_dir / key).read_bytes()
        assert (target / key).stat().st_mode & 0o777 == 0o600
    for query in ("restart the queue worker 7", "on-call rota", "deploy"):
        assert ([hit["id"] for hit in restored.json("memory", "search", query)]
                == [hit["id"] for hit in node.json("memory", "search", query)])
    assert (target / "memory" / "default" / "scratch.md").read_bytes() == (
        node.data_dir / "memory" / "default" / "scratch.md").read_bytes()
    assert (target / CHANNEL_RECORD).read_bytes() == (node.data_dir / CHANNEL_RECORD).read_bytes()
    assert not (target / "x402-channels" / "server" / "notes.txt").exists()
    assert leftovers(tmp_path) == []


def _variants(data: bytes) -> dict[str, bytes]:
    middle = len(data) // 2
    return {
        "flipped byte": data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1:],
        "truncated": data[:middle],
        "final chunk dropped": data[:HEADER_BYTES],
        "last byte dropped": data[:-1],
        "bytes appended": data + b"\x00",
        "kdf parameter changed": data[:len(MAGIC) + 3] + bytes([data[len(MAGIC) + 3] ^ 1]) + data[len(MAGIC) + 4:],
        "not a backup": b"PK\x03\x04" + data[4:],
    }


@pytest.mark.parametrize("damage", list(_variants(b"x" * 200)))
def test_damaged_backup_is_refused_and_nothing_written(node: Cli, tmp_path: Path, damage: str) -> None:
    archive = tmp_path / "node.cmbackup"
    backup(node, archive)
    bad = tmp_path / "bad.cmbackup"
    bad.write_bytes(_variants(archive.read_bytes())[damage])
    line = node.fails("restore", str(bad), "--data-dir", str(tmp_path / "restored"), "--passphrase-env", "CM_PASS")
    assert "bad.cmbackup" in line
    assert not (tmp_path / "restored").exists()
    assert leftovers(tmp_path) == []


def test_wrong_passphrase_is_refused_and_nothing_written(node: Cli, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "node.cmbackup"
    backup(node, archive)
    monkeypatch.setenv("CM_PASS", PASSPHRASE + "!")
    line = node.fails("restore", str(archive), "--data-dir", str(tmp_path / "restored"),
                      "--passphrase-env", "CM_PASS")
    assert "wrong passphrase" in line
    assert not (tmp_path / "restored").exists() and leftovers(tmp_path) == []
    monkeypatch.delenv("CM_PASS")
    assert "environment variable" in node.fails("backup", "--to", str(archive), "--passphrase-env", "CM_PASS")


def test_restore_refuses_a_non_empty_target(node: Cli, tmp_path: Path) -> None:
    archive = tmp_path / "node.cmbackup"
    backup(node, archive)
    line = node.fails("restore", str(archive), "--data-dir", str(node.data_dir), "--passphrase-env", "CM_PASS")
    assert "not empty" in line


def _hostile(path: Path, members: list[tarfile.TarInfo]) -> None:
    """A well-encrypted archive (right passphrase) whose contents are not what backups write."""
    with open(path, "wb") as handle:
        writer = EncryptingWriter(handle, PASSPHRASE.encode())
        with tarfile.open(fileobj=writer, mode="w|") as tar:  # type: ignore[call-overload]
            tar.addfile(_file("node.toml", b"name = 'x'\n"), io.BytesIO(b"name = 'x'\n"))
            for member in members:
                tar.addfile(member, io.BytesIO(b"evil" * (member.size // 4)) if member.isreg() else None)
        writer.close()


def _file(name: str, data: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.mark.parametrize("member", [
    _file("../escaped", b"evil"), _file("/tmp/absolute", b"evil"), _file("memory/../../x", b"evil"),
    _file("memory/default/../../identity.key", b"evil"), _file("unknown.bin", b"evil"),
    _link("identity.key", "/etc/passwd"), _file("node.toml", b"evil"),
    _file("x402-channels/server/../../identity.key", b"evil"), _file("x402-channels/server/evil.json", b"evil"),
], ids=["dotdot", "absolute", "nested-dotdot", "namespace-dotdot", "unknown", "symlink", "duplicate",
        "channel-dotdot", "channel-not-a-record"])
def test_hostile_archive_members_are_refused(node: Cli, tmp_path: Path, member: tarfile.TarInfo) -> None:
    archive = tmp_path / "hostile.cmbackup"
    _hostile(archive, [member])
    line = node.fails("restore", str(archive), "--data-dir", str(tmp_path / "restored"),
                      "--passphrase-env", "CM_PASS")
    assert "which no backup writes" in line
    assert not (tmp_path / "restored").exists() and leftovers(tmp_path) == []
    assert not (tmp_path.parent / "escaped").exists()


def test_kill_during_backup_leaves_the_previous_backup_and_the_node(node: Cli, tmp_path: Path) -> None:
    archive = tmp_path / "node.cmbackup"
    backup(node, archive)
    previous = archive.read_bytes()
    db = node.data_dir / "crystals.db"
    env = {k: v for k, v in os.environ.items()} | {"PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fault_backup", "--", "--data-dir", str(node.data_dir),
         "backup", "--to", str(archive), "--passphrase-env", "CM_PASS"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"PAUSED\n", process.stderr.read() if process.stderr else ""
        staging = [p for p in tmp_path.iterdir() if p.name.startswith(".crystalmesh-backup-")]
        assert staging and (staging[0] / "archive").stat().st_size > 0  # killed mid-write
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert archive.read_bytes() == previous
    target = tmp_path / "restored"
    code, _, err = restore(node, archive, target)
    assert code == 0, err
    assert sqlite3.connect(db).execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert node.json("memory", "status")["total"] == 13
    backup(node, archive)  # the next backup clears what the killed one left beside the file
    assert leftovers(tmp_path) == []
