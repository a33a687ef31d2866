"""The secret/PII classifier on the hand-labelled set (tests/data/sensitivity_set.jsonl):
a regression guard at the figures recorded in docs/benchmarks.md (held-out split)."""

from __future__ import annotations

import json
from pathlib import Path

from node.crystals.governance import sensitive_classes

DATA = Path(__file__).resolve().parents[2] / "data" / "sensitivity_set.jsonl"


def test_held_out_precision_and_recall() -> None:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    assert len(rows) >= 200
    held = [row for row in rows if row["split"] == "heldout"]
    flagged = [(row["label"] != "normal", bool(sensitive_classes(row["text"]))) for row in held]
    tp = sum(1 for want, got in flagged if want and got)
    fp = sum(1 for want, got in flagged if got and not want)
    fn = sum(1 for want, got in flagged if want and not got)
    assert tp / (tp + fp) >= 0.95
    assert tp / (tp + fn) >= 0.9


def test_prose_password_from_the_issue_is_named() -> None:
    assert sensitive_classes("the db password is tango42") == ["password"]
    assert sensitive_classes("The password is stored in vault, never in the repo") == []
