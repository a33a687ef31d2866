#!/usr/bin/env python
"""Bookkeeping only: turn the hand-written m*.txt / q*.txt files into tests/data/retrieval_fresh2.json.

Written in stop 20, after the first fresh set (retrieval_fresh.json) had been used for
tuning, as a third yardstick that nobody has tuned on (issue 17): one imagined user
(Hanna, a product design lead and engineering manager in Helsinki). Formats and
checks are in tests/data/retrieval_build.py, shared with the other hand-written sets.

    python tests/data/retrieval_fresh2/build.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import retrieval_build  # noqa: E402
from retrieval_build import content_words, render, shared_words  # noqa: E402,F401

OUT = HERE.parent / "retrieval_fresh2.json"
SPEC = retrieval_build.SetSpec(
    here=HERE,
    out=OUT,
    minimum={
        "paraphrase": 70,
        "identifier": 35,
        "keyword": 25,
        "multi-hop": 20,
        "negation-trap": 25,
    },
    minimum_memories=220,
    description=(
        "Second fresh held-out set, hand-written in stop 20 (issue 17) after the second set "
        "(retrieval_fresh.json) had been used for tuning, and never tuned on: agent memories "
        "of one imagined user (Hanna, a product design lead and engineering manager at an e-bike sharing company in "
        "Helsinki, September 2025-February 2026: design tickets, releases, user research, "
        "vendors, team and hiring, home, family, health, money, travel, hobbies) and judged "
        "queries (grade 2 = answers it, 1 = useful context). Kinds: paraphrase (no content "
        "word shared with any grade-2 memory), identifier, keyword, multi-hop (two grade-2 "
        "memories), negation-trap. Every query is heldout: evaluated once, by the "
        "coordinator, at the end. Source: tests/data/retrieval_fresh2/*.txt, built by "
        "tests/data/retrieval_fresh2/build.py."
    ),
)


def build() -> tuple[dict[str, Any], list[str]]:
    """The data set and the paraphrase report lines (``near`` prefix matches only)."""
    return retrieval_build.build(SPEC)


if __name__ == "__main__":
    retrieval_build.main(SPEC)
