"""``crystalmesh skill scan PATH --json``: the scanner's verdict and findings for a local skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Cli

pytestmark = pytest.mark.usefixtures("isolated_home")

CORPUS = Path(__file__).resolve().parents[2] / "data" / "skill_scan" / "tune"


def test_scan_a_local_skill_file_and_folder(initialised: Cli, tmp_path: Path) -> None:
    code, out, _ = initialised.run("--json", "skill", "scan", str(CORPUS / "malicious" / "dl-curl-sh.md"))
    assert code == 3  # quarantine: a script can stop on it
    report = json.loads(out)
    assert report["verdict"] == "quarantine"
    assert {"rule", "severity", "line", "excerpt"} <= set(report["findings"][0])
    assert any(f["rule"] == "download_execute" and f["line"] == 8 for f in report["findings"])

    folder = tmp_path / "checklist"
    folder.mkdir()
    (folder / "SKILL.md").write_text((CORPUS / "benign" / "secret-scanning.md").read_text())
    clean = initialised.json("skill", "scan", str(folder))
    assert clean["verdict"] == "ok" and clean["findings"] == []

    code, out, _ = initialised.run("skill", "scan", str(CORPUS / "malicious" / "dl-curl-sh.md"))
    assert code == 3 and out.startswith("quarantine") and "download_execute" in out


def test_a_malformed_or_huge_local_skill_is_refused_not_a_crash(initialised: Cli, tmp_path: Path) -> None:
    nested = tmp_path / "nested.md"
    nested.write_text("---\nname: a\ndescription: b\nmetadata: {x: {y: {z: 1}}}\n---\nbody\n")
    huge = tmp_path / "huge.md"
    huge.write_text("x" * 300_000)
    for path in (nested, huge):
        code, out, err = initialised.run("--json", "skill", "scan", str(path))
        assert code == 3, err
        assert '"unscannable"' in out
