"""Issue 30, fault cases: a damaged data dir ends in one clear error or a repaired node with
an exact account of what was lost (docs/operations.md, "Fault cases").

Each case damages the files of a real data dir (made by the real CLI, hashing embedder)
the way a disk or a kill -9 would, then runs the real ``crystalmesh``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from node.config import load_config
from node.memory import Memory
from node.ops import read_wal
from tests.support.cli import Cli

REPO = Path(__file__).resolve().parents[3]
CRYSTALS = 120

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def node_dir(initialised: Cli) -> Path:
    """A stopped node holding CRYSTALS crystals (rowids 1..CRYSTALS), index saved."""
    memory = Memory(load_config(initialised.data_dir, environ={}))
    try:
        for number in range(CRYSTALS):
            memory.add(f"incident {number}: the deploy of service {number} failed " + "detail " * number)
    finally:
        memory.close()
    return initialised.data_dir


def last_page(db: Path) -> tuple[int, str, str, int]:
    """(page number, owner, page type, cells on it) of the file's last page (dbstat)."""
    conn = sqlite3.connect(db)
    try:
        count = conn.execute("PRAGMA page_count").fetchone()[0]
        row = conn.execute("SELECT pageno, name, pagetype, ncell FROM dbstat WHERE pageno = ?",
                           (count,)).fetchone()
    finally:
        conn.close()
    return row


def count_rows(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def run_node(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``crystalmesh run`` as a process (it must refuse before it starts anything)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTALMESH_")}
    env["CRYSTALMESH_HOME"] = str(data_dir.parent / "home")
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "run"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def assert_refused(cli: Cli, *words: str) -> str:
    line = cli.fails("memory", "status")
    for word in words:
        assert word in line, line
    return line


def doctor(cli: Cli, *args: str) -> tuple[int, dict[str, dict[str, object]]]:
    code, out, err = cli.run("--json", "doctor", *args)
    assert "Traceback" not in err
    report = json.loads(out)
    return code, {finding["check"]: finding for finding in report["findings"]}


def test_last_page_overwritten_is_refused_then_repaired_with_exact_account(
        initialised: Cli, node_dir: Path) -> None:
    db = node_dir / "crystals.db"
    page, owner, kind, cells = last_page(db)
    assert (owner, kind) == ("crystals", "leaf") and cells >= 1
    with open(db, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(b"\xa5" * 4096)

    line = assert_refused(initialised, str(db), "damaged", "crystalmesh restore", "doctor --repair")
    started = run_node(node_dir)
    assert started.returncode == 1
    assert started.stderr.strip().splitlines() == [line], started.stderr
    code, findings = doctor(initialised)
    assert code == 1 and findings["crystals.db"]["verdict"] == "fail"

    code, findings = doctor(initialised, "--repair")
    assert code == 0, findings
    tables = {t["table"]: t for t in findings["repaired crystals.db"]["repair"]}  # type: ignore[union-attr]
    assert tables["crystals"]["before"] == CRYSTALS
    assert tables["crystals"]["after"] == CRYSTALS - cells  # exactly the rows of the page
    assert tables["crystals"]["lost"] == cells
    assert all(t["lost"] == 0 for name, t in tables.items() if name != "crystals")
    assert findings["repaired index.hnsw"]["detail"].startswith("rebuilt")  # type: ignore[union-attr]
    assert count_rows(db, "crystals") == CRYSTALS - cells
    kept = list(node_dir.glob("crystals.db.damaged-*"))
    assert [p.name for p in kept if not p.name.endswith(("-wal", "-shm"))]

    status = initialised.json("memory", "status")
    assert status["total"] == CRYSTALS - cells
    hits = initialised.json("memory", "search", "incident 3: the deploy of service 3 failed")
    assert hits and hits[0]["crystal"]["text"].startswith("incident 3:")
    code, findings = doctor(initialised)
    assert code == 0 and findings["crystals.db"]["verdict"] == "ok"


def test_truncated_file_is_refused_then_repaired_with_exact_account(
        initialised: Cli, node_dir: Path) -> None:
    db = node_dir / "crystals.db"
    intact = node_dir.parent / "intact.db"
    shutil.copy(db, intact)
    size = db.stat().st_size
    keep_pages = size // 4096 - 3
    os.truncate(db, keep_pages * 4096)
    assert_refused(initialised, str(db), "damaged")

    code, findings = doctor(initialised, "--repair")
    assert code == 0, findings
    tables = {t["table"]: t for t in findings["repaired crystals.db"]["repair"]}  # type: ignore[union-attr]
    # Exactly the rows on the crystals pages that were cut off are lost (no row of this
    # fixture spills onto overflow pages).
    conn = sqlite3.connect(intact)
    cut = conn.execute("SELECT coalesce(sum(ncell), 0) FROM dbstat WHERE name = 'crystals' AND "
                       "pagetype = 'leaf' AND pageno > ?", (keep_pages,)).fetchone()[0]
    assert conn.execute("SELECT count(*) FROM dbstat WHERE name = 'crystals' AND pagetype = 'overflow'"
                        ).fetchone()[0] == 0
    conn.close()
    assert cut >= 1
    assert tables["crystals"]["after"] == CRYSTALS - cut == count_rows(db, "crystals")
    assert tables["crystals"]["before"] in (None, CRYSTALS)
    assert initialised.json("memory", "status")["total"] == CRYSTALS - cut


def test_bad_header_is_refused_and_repair_says_restore(initialised: Cli, node_dir: Path) -> None:
    db = node_dir / "crystals.db"
    with open(db, "r+b") as handle:
        handle.write(b"\x00" * 100)
    assert_refused(initialised, str(db), "not a database")
    code, findings = doctor(initialised)
    assert code == 1 and "bad header" in str(findings["crystals.db"]["detail"])
    line = initialised.fails("doctor", "--repair")
    assert "schema is unreadable" in line and "restore a backup" in line
    # Nothing moved: the damaged file is where it was, no salvage left behind.
    assert sorted(p.name for p in node_dir.glob("crystals.db*")) == ["crystals.db"]


def test_torn_wal_loses_exactly_the_unfinished_transaction(initialised: Cli, node_dir: Path) -> None:
    """A kill -9 while a transaction was being appended to the log: the files as a crash
    leaves them (copied while the writer still holds them open), the log's last frame torn."""
    config = load_config(node_dir, environ={})
    memory = Memory(config)
    crash = node_dir.parent / "crash"
    try:
        memory.db.execute("PRAGMA wal_autocheckpoint=0")  # keep every commit in the log
        for number in range(5):
            memory.add(f"after the last checkpoint {number}: cache warm-up runs before traffic")
        crash.mkdir()
        for name in os.listdir(node_dir):
            if not name.endswith("-shm") and (node_dir / name).is_file():
                shutil.copy2(node_dir / name, crash / name)
    finally:
        memory.close()
    wal = crash / "crystals.db-wal"
    whole = read_wal(wal)
    assert whole.transactions >= 5 and not whole.torn
    os.truncate(wal, wal.stat().st_size - 100)  # the last frame, half written
    torn = read_wal(wal)
    assert torn.transactions == whole.transactions - 1 and torn.torn

    crashed = Cli(initialised.capsys, crash)
    code, findings = doctor(crashed)
    assert code == 0  # SQLite copes: the torn tail is dropped, nothing else is lost
    assert findings["crystals.db-wal"]["verdict"] == "warn"
    assert f"{torn.transactions} committed transaction(s)" in str(findings["crystals.db-wal"]["detail"])
    status = crashed.json("memory", "status")
    assert status["total"] == CRYSTALS + 4  # the fifth add was the transaction torn


@pytest.mark.parametrize("name", ["identity.key", "wallet.key"])
def test_world_readable_key_stops_the_node(initialised: Cli, node_dir: Path, name: str) -> None:
    key = node_dir / name
    key.chmod(0o644)
    started = run_node(node_dir)
    assert started.returncode == 1
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], started.stderr
    assert "chmod 600" in lines[0]
    code, findings = doctor(initialised)
    assert code == 1 and findings[name]["verdict"] == "fail" and "0o644" in str(findings[name]["detail"])
