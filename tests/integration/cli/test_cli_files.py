"""``crystalmesh memory index`` as a user runs it: once (human and --json output), again after
an edit, and ``--watch`` in a real process that re-syncs an edit and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.cli import Cli
from tests.support.wait import wait_until

REPO = Path(__file__).resolve().parents[3]


def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "CLAUDE.md").write_text("# Project rules\n\nAlways run the gerenuk linter.\n")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return root


def test_index_then_resync_after_an_edit(initialised: Cli, tmp_path: Path) -> None:
    root = notes(tmp_path)
    code, out, err = initialised.run("memory", "index", str(root))
    assert code == 0, err
    assert "files: 1 seen, 1 indexed, 0 unchanged, 0 removed; skipped: 1 binary" in out
    assert "chunks: 1 added" in out and "changed files synced" in err  # progress on stderr
    (root / "CLAUDE.md").write_text("# Project rules\n\nAlways run the gerenuk linter twice.\n")
    summary = initialised.json("memory", "index", str(root))
    assert summary["chunks"]["versioned"] == 1 and summary["files"]["indexed"] == 1
    hits = initialised.json("memory", "search", "gerenuk linter")
    assert hits[0]["crystal"]["path"] == str(root.resolve() / "CLAUDE.md")
    assert hits[0]["crystal"]["text"].endswith("twice.")
    code, _, err = initialised.run("memory", "index", str(tmp_path / "missing"))
    assert code != 0 and "does not exist" in err and "Traceback" not in err


def test_watch_resyncs_an_edit_and_stops_cleanly_on_ctrl_c(initialised: Cli, tmp_path: Path) -> None:
    root = notes(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-m", "node.cli.main", "--data-dir", str(initialised.data_dir), "memory", "index",
         str(root), "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: any("1 added" in line for line in lines), 60, "the first sync")
        (root / "CLAUDE.md").write_text("# Project rules\n\nNever skip the gerenuk linter.\n")
        wait_until(lambda: any("1 versioned" in line for line in lines), 60, "the edit re-synced")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert "stopped" in process.stderr.read()  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
