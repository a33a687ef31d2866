"""``crystalmesh doctor``: what a data dir holds and whether each part is sound.

Works on a stopped node (it only reads the files; databases are opened
read-only, their write-ahead logs are read before any connection could replay
them). Each finding has a verdict: ``ok``; ``warn`` (the node copes on its own:
an index it will rebuild, a torn log tail SQLite drops); ``fail`` (the node
refuses to start, or should: a damaged database, a key others can read).

``repair`` salvages each failing database (node.ops.recovery) into a new file,
keeps the damaged one beside it as ``<name>.damaged-<UTC time>`` and has the
HNSW index rebuilt from the salvaged store.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from node.config import ConfigError, NodeConfig, load_config
from node.db import StoreDamaged, integrity_problems
from node.ops.recovery import TableSalvage, salvage
from node.ops.wal import read_wal

OK, WARN, FAIL = "ok", "warn", "fail"
SQLITE_MAGIC = b"SQLite format 3\x00"
# Every SQLite file of a data dir, in the order they are reported.
STORE_FILES = ("crystals.db", "settlements.db")
SECRET_FILES = ("identity.key", "wallet.key", "api.token")


@dataclass
class Finding:
    check: str
    verdict: str
    detail: str
    repair: list[dict[str, Any]] = field(default_factory=list)  # per table, after --repair

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.repair:
            data.pop("repair")
        return data


def examine(data_dir: Path, *, full: bool = False) -> list[Finding]:
    """Every file check of ``data_dir`` (``full``: ``integrity_check`` instead of ``quick_check``)."""
    findings = [_config(data_dir)]
    findings += [_secret(data_dir / name) for name in SECRET_FILES]
    for name in STORE_FILES:
        findings += _store(data_dir / name, full=full)
    findings.append(_index(data_dir))
    findings += _working_memory(data_dir)
    return findings


def _config(data_dir: Path) -> Finding:
    path = data_dir / "node.toml"
    if not path.exists():
        return Finding("node.toml", FAIL, f"{path} is missing; not a data dir (`crystalmesh init`)")
    try:
        config = load_config(data_dir, environ={})
    except ConfigError as exc:
        return Finding("node.toml", FAIL, str(exc))
    return Finding("node.toml", OK, f"parses; node {config.name!r} on {config.net.network}")


def _secret(path: Path) -> Finding:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        verdict = WARN if path.name == "api.token" else FAIL  # the token is made on start
        return Finding(path.name, verdict, f"{path} is missing")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return Finding(path.name, FAIL, f"readable by other users (mode {oct(mode & 0o777)}): "
                       f"`chmod 600 {path}`, and treat the key as exposed")
    return Finding(path.name, OK, f"mode {oct(mode & 0o777)}")


def _store(path: Path, *, full: bool) -> list[Finding]:
    findings = []
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        report = read_wal(wal)
        findings.append(Finding(wal.name, WARN if report.torn else OK, report.describe()))
    journal = path.with_name(path.name + "-journal")
    if journal.exists() and journal.stat().st_size > 0:
        findings.append(Finding(journal.name, WARN, f"{journal.stat().st_size} bytes: a rollback journal of "
                                "an interrupted transaction, rolled back when the database is next opened"))
    if not path.exists():
        if path.name == "crystals.db":
            findings.append(Finding(path.name, WARN, "absent: made empty on the next start"))
        return findings
    findings.append(check_store(path, full=full))
    return findings


def check_store(path: Path, *, full: bool = False) -> Finding:
    """One database: its header, then ``quick_check`` (or ``integrity_check``)."""
    with open(path, "rb") as handle:
        header = handle.read(100)
    if header and not header.startswith(SQLITE_MAGIC):
        return Finding(path.name, FAIL, StoreDamaged(path, "bad header: not a SQLite file").args[0])
    if header and len(header) < 100:
        return Finding(path.name, FAIL, StoreDamaged(path, "truncated inside its header").args[0])
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return Finding(path.name, FAIL, f"{path}: cannot open ({exc})")
    try:
        problems = integrity_problems(conn, full=full)
        pages = None if problems else int(conn.execute("PRAGMA page_count").fetchone()[0])
    except sqlite3.Error as exc:
        return Finding(path.name, FAIL, f"{path}: cannot check ({exc})")
    finally:
        conn.close()
    check = "integrity_check" if full else "quick_check"
    if problems:
        return Finding(path.name, FAIL, StoreDamaged(path, "; ".join(problems[:3])).args[0])
    return Finding(path.name, OK, f"{check} ok ({pages} pages)")


def _index(data_dir: Path) -> Finding:
    from node.crystals import file_sha256

    path = data_dir / "index.hnsw"
    sidecar = path.with_name("index.hnsw.json")
    if not path.exists() or not sidecar.exists():
        return Finding("index.hnsw", WARN, "absent: built from the store on the next start")
    try:
        meta = json.loads(sidecar.read_text())
    except (OSError, ValueError) as exc:
        return Finding("index.hnsw", WARN, f"sidecar unreadable ({exc}): rebuilt on the next start")
    if meta.get("sha256") != file_sha256(path):
        return Finding("index.hnsw", WARN, "checksum mismatch: rebuilt from the store on the next start")
    return Finding("index.hnsw", OK, f"{meta.get('count', '?')} vectors, checksum ok")


def _working_memory(data_dir: Path) -> list[Finding]:
    from node.memory import parse_scratch

    findings = []
    root = data_dir / "memory"
    for directory in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        check = f"memory/{directory.name}"
        problems = []
        scratch = directory / "scratch.md"
        notes = 0
        if scratch.is_file():
            contents = parse_scratch(scratch.read_bytes())
            notes = len(contents.notes)
            if contents.corrupt:
                problems.append(f"{len(contents.corrupt)} scratch line(s) fail their checksum (never consumed)")
            if contents.torn_tail:
                problems.append("a torn last scratch line (never acknowledged; cut on the next note)")
        if (directory / "dream.journal").exists():
            problems.append("a committed dream is waiting in dream.journal (applied on the next start)")
        detail = f"{notes} scratch note(s)" + ("; " + "; ".join(problems) if problems else "")
        findings.append(Finding(check, WARN if problems else OK, detail))
    return findings


def repair(config: NodeConfig, findings: list[Finding], *, now_s: float | None = None) -> list[Finding]:
    """Salvage each failing database; returns one finding per store repaired (with its tables)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now_s is None else now_s))
    repaired = []
    for finding in findings:
        if finding.verdict != FAIL or finding.check not in STORE_FILES:
            continue
        path = config.data_dir / finding.check
        tables = _salvage_in_place(path, stamp)
        lost = [t for t in tables if t.lost != 0]
        summary = ", ".join(
            f"{t.table} {t.after}/{'?' if t.before is None else t.before}" for t in lost) or "no row lost"
        repaired.append(Finding(finding.check, OK, f"salvaged into a new {path.name} (rows after/before: "
                                f"{summary}); the damaged file is kept as {path.name}.damaged-{stamp}",
                                [t.to_dict() for t in tables]))
    if any(f.check == "crystals.db" for f in repaired):
        for name in ("index.hnsw", "index.hnsw.json"):
            (config.data_dir / name).unlink(missing_ok=True)
        from node.memory import Memory

        memory = Memory(config)  # rebuilds the vector index from the salvaged store
        try:
            state, count = memory.index_state, memory.index.count
        finally:
            memory.close()
        repaired.append(Finding("index.hnsw", OK, f"{state} from the salvaged store: {count} vectors"))
    return repaired


def _salvage_in_place(path: Path, stamp: str) -> list[TableSalvage]:
    """``path`` becomes the salvaged copy; the damaged file (and its log) move aside."""
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    fresh = path.with_name(f"{path.name}.salvaged-{stamp}")
    # The damaged file keeps its log beside it under the matching name, so reading it
    # replays the same committed transactions SQLite would have replayed.
    moves = [(path, kept)] + [(path.with_name(path.name + suffix), kept.with_name(kept.name + suffix))
                              for suffix in ("-wal", "-shm") if path.with_name(path.name + suffix).exists()]
    for source, target in moves:
        os.replace(source, target)
    try:
        tables = salvage(kept, fresh)
    except BaseException:
        fresh.unlink(missing_ok=True)
        for source, target in moves:
            os.replace(target, source)
        raise
    os.replace(fresh, path)
    for suffix in ("-wal", "-shm"):
        leftover = fresh.with_name(fresh.name + suffix)
        if leftover.exists():
            os.replace(leftover, path.with_name(path.name + suffix))
    return tables
