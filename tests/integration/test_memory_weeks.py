"""The scripted run over simulated weeks (issue 16's "done when"): scripts/memory_weeks.py, in-process."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "memory_weeks.py"


def main(argv: list[str]) -> int:
    spec = importlib.util.spec_from_file_location("memory_weeks", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: int = module.main(argv)
    return result


def test_simulated_weeks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--embedder", "hashing"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
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
