#!/usr/bin/env python
"""Bookkeeping only: turn the hand-written m*.txt / q*.txt files into tests/data/retrieval_fresh3.json.

Written in stop 22, after the two stop 20 sets (retrieval_fresh.json, retrieval_fresh2.json)
had been looked at several times, as a clean final yardstick that nobody has seen or tuned
on (issue 17): one imagined user (Dario, an ML engineer at an agritech start-up in Bologna).
Formats and checks are in tests/data/retrieval_build.py, shared with the other hand-written sets.

    python tests/data/retrieval_fresh3/build.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import retrieval_build  # noqa: E402
from retrieval_build import content_words, render, shared_words  # noqa: E402,F401

OUT = HERE.parent / "retrieval_fresh3.json"
SPEC = retrieval_build.SetSpec(
    here=HERE,
    out=OUT,
    minimum={
        "paraphrase": 80,
        "identifier": 45,
        "keyword": 30,
        "multi-hop": 25,
        "negation-trap": 30,
    },
    minimum_memories=230,
    description=(
        "Third fresh held-out set, hand-written in stop 22 (issue 17) after the two stop 20 sets "
        "(retrieval_fresh.json, retrieval_fresh2.json) had been looked at several times, and "
        "never tuned on: agent memories of one imagined user (Dario Ferri, an ML engineer at "
        "Granaio, an agritech start-up in Bologna doing yield forecasts and crop-disease "
        "detection from drone and satellite imagery, May-September 2026: tickets, models and "
        "releases, data pipelines, experiments, incidents, vendors, team and hiring, home, "
        "family, health, money, travel, hobbies, words shared between work and life) and "
        "judged queries (grade 2 = answers it, 1 = useful context). Kinds: paraphrase (no "
        "content word shared with any grade-2 memory), identifier, keyword, multi-hop (two "
        "grade-2 memories), negation-trap (about half phrased without a negation word). Every "
        "query is heldout: evaluated once, by the coordinator, at the end. Source: "
        "tests/data/retrieval_fresh3/*.txt, built by tests/data/retrieval_fresh3/build.py."
    ),
)


def build() -> tuple[dict[str, Any], list[str]]:
    """The data set and the paraphrase report lines (``near`` prefix matches only)."""
    return retrieval_build.build(SPEC)


if __name__ == "__main__":
    retrieval_build.main(SPEC)
