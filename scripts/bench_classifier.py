#!/usr/bin/env python
"""Secret / PII classifier on the hand-labelled set tests/data/sensitivity_set.jsonl.

    .venv/bin/python scripts/bench_classifier.py [--smoke]

Each line: ``text``, ``label`` (a class name or ``normal``) and ``split``
(``tune`` / ``heldout``, assigned by a hash of the text when the set was
written, before anything was measured). Reported per split:

- flagged precision / recall: "this text must not be published" vs normal;
- per class recall: the expected class is among the classes the classifier names;
- the same flagged precision / recall for the baseline, the pattern set this
  node shipped before issue 12 (``_CONFIDENTIAL_PATTERNS`` + ``_PERSONAL_PATTERNS``
  alone), run in the same process.

The last line is one JSON object. ``--smoke``: the first 20 rows of each split.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from _bench import add_smoke_flag, print_result

from node.crystals import governance

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "sensitivity_set.jsonl"


def baseline_flags(text: str) -> bool:
    patterns = governance._CONFIDENTIAL_PATTERNS + governance._PERSONAL_PATTERNS
    return any(pattern.search(text) for pattern in patterns)


def precision_recall(pairs: list[tuple[bool, bool]]) -> dict[str, float]:
    tp = sum(1 for want, got in pairs if want and got)
    fp = sum(1 for want, got in pairs if not want and got)
    fn = sum(1 for want, got in pairs if want and not got)
    return {"precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
            "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0, "fp": fp, "fn": fn}


SMOKE_ROWS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke_flag(parser)
    arguments = parser.parse_args()
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    report: dict[str, dict] = {}
    for split in ("tune", "heldout"):
        subset = [row for row in rows if row["split"] == split]
        if arguments.smoke:
            subset = subset[:SMOKE_ROWS]
        ours = [(row["label"] != "normal", bool(governance.sensitive_classes(row["text"])))
                for row in subset]
        base = [(row["label"] != "normal", baseline_flags(row["text"])) for row in subset]
        per_class: dict[str, list[bool]] = defaultdict(list)
        for row in subset:
            if row["label"] != "normal":
                found = set(governance.sensitive_classes(row["text"]))
                # Generic credential patterns (key=..., token ...) name their class "secret".
                accepted = {row["label"], "secret"} if row["label"] == "api_key" else {row["label"]}
                per_class[row["label"]].append(bool(found & accepted))
        report[split] = {
            "n": len(subset),
            "flagged": precision_recall(ours),
            "baseline_flagged": precision_recall(base),
            "class_recall": {name: round(sum(hits) / len(hits), 3) for name, hits in sorted(per_class.items())},
        }
        print(split, json.dumps(report[split]))
        for row in subset:
            got = governance.sensitive_classes(row["text"])
            if (row["label"] == "normal") != (not got) and split == "tune":
                print("  tune miss:", row["label"], got, row["text"][:70])
    print_result(report)


if __name__ == "__main__":
    main()
