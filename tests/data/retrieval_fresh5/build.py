#!/usr/bin/env python
"""Bookkeeping only: turn the hand-written m*.txt / q*.txt files into tests/data/retrieval_fresh5.json.

Written in stop 23, after retrieval_fresh4.json had been evaluated once and, with the v2
held-out half, became tune data for a second fusion change of stop 23, as a clean final
yardstick that nobody has seen or tuned on (issue 17): one imagined user (Lukas, a firmware
engineer at an e-bike drive maker in Graz).
Formats and checks are in tests/data/retrieval_build.py, shared with the other hand-written sets.

    python tests/data/retrieval_fresh5/build.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import retrieval_build  # noqa: E402
from retrieval_build import content_words, render, shared_words  # noqa: E402,F401

OUT = HERE.parent / "retrieval_fresh5.json"
SPEC = retrieval_build.SetSpec(
    here=HERE,
    out=OUT,
    minimum={
        "paraphrase": 90,
        "identifier": 50,
        "keyword": 34,
        "multi-hop": 26,
        "negation-trap": 34,
    },
    minimum_memories=400,
    description=(
        "Fifth fresh held-out set, hand-written in stop 23 (issue 17) after the fourth set "
        "(retrieval_fresh4.json) and the v2 held-out half had been evaluated and became tune "
        "data, and never tuned on: agent memories of one imagined user (Lukas Brenner, a "
        "firmware engineer at Voltrad, an e-bike drive maker in Graz, January-June 2027: work "
        "in m01-m08, life in m09-m16) and judged queries (grade 2 = answers it, 1 = useful "
        "context). Kinds: paraphrase (no content word shared with any grade-2 memory), "
        "identifier, keyword, multi-hop (two grade-2 memories), negation-trap (about half "
        "phrased without a negation word). Every query is heldout: evaluated once, by the "
        "coordinator, at the end. Source: tests/data/retrieval_fresh5/*.txt, built by "
        "tests/data/retrieval_fresh5/build.py."
    ),
)


def build() -> tuple[dict[str, Any], list[str]]:
    """The data set and the paraphrase report lines (``near`` prefix matches only)."""
    return retrieval_build.build(SPEC)


if __name__ == "__main__":
    retrieval_build.main(SPEC)
