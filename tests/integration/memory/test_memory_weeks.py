"""The scripted run over simulated weeks (issue 16's "done when"): scripts/memory_weeks.py, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "memory_weeks.py"


def test_simulated_weeks() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--embedder", "hashing"],
                         capture_output=True, text=True, cwd=REPO, timeout=600,
                         env=os.environ | {"PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    learning = summary["learning"]
    # episodes folded into facts; the fact with more evidence outlived the one with less
    assert learning["counts"]["deploy"] > learning["counts"]["backup"] == 3
    assert learning["evicted_on_day"]["backup"] < learning["evicted_on_day"]["deploy"]
    # the warning survived eight weeks, a "wrong" vote and every purge, at its floor
    assert learning["warning_alive"] and learning["warning_confidence"] == 0.3
    tiers = summary["tiers"]
    assert tiers["before_boundary"] == "working"
    assert tiers["tiers"] == {"idle": "expired", "hot": "short_term", "session": "short_term", "long": "long_term"}
    testament = summary["testament"]
    assert testament["imported"]["imported"] == testament["exported"]["entries"]
    assert [hit["origin"] for hit in testament["ranking"][:2]] == ["inferred", "peer"]
    assert testament["ranking"][0]["confidence"] > testament["ranking"][1]["confidence"]
    assert testament["heir_warnings"]
