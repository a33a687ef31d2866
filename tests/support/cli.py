"""In-process ``crystalmesh`` CLI runs against a temporary data dir (shared by the CLI tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from node.cli.main import main


def isolate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing may touch ~/.crystalmesh, and no CRYSTALMESH_* setting leaks in."""
    for name in list(os.environ):
        if name.startswith("CRYSTALMESH_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("CRYSTALMESH_HOME", str(home))
    return home


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
        self.capsys = capsys
        self.data_dir = data_dir

    def run(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["--data-dir", str(self.data_dir), *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self.run("--json", *args)
        assert code == 0, err
        return json.loads(out)

    def fails(self, *args: str) -> str:
        """Run a command that must fail cleanly; returns its one error line."""
        code, out, err = self.run(*args)
        assert code != 0
        assert "Traceback" not in out + err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("error: ")
        return lines[0]
