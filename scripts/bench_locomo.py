#!/usr/bin/env python
"""The retrieval half of LoCoMo through the product's ``Memory.search``, beside BM25 and dense.

LoCoMo: Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", ACL 2024. Each conversation file (LoCoMo's shape, see
tests/support/sessions/locomo.py) goes into a fresh data dir the way a user stores it
(``memory ingest --conversation``): every turn one memory,
``"(<session date>) <speaker>: <text>"`` plus ``" [shares <caption>]"`` for a
photo and the relative dates resolved, with its session recorded. Each
question is then asked of the product (``Memory.search``, k=10), of BM25 alone
(FTS5) and of dense search alone (exact cosine over every turn, the configured
embedder), in the same run, and scored on its evidence turns: recall@5,
recall@10, nDCG@10 per category and overall (categories 1-4; category 5,
adversarial, is reported apart), and at the session level: session Hit@1 and
Hit@5 (the sessions of the top 10 turns deduplicated in rank order; the
measure of arXiv 2606.04194, which reports on LoCoMo BM25 0.640 Hit@1, one
pooled vector 0.427, max-sim over per-turn vectors 0.664, BM25 + max-sim score
fusion 0.752). Each product search is also timed in process (``search_ms``).
Files named by ``--held-back`` are reported apart ("held-back"), the others as
"tune". The last line is one JSON object; its ``ratio`` is the product's
overall nDCG@10 over the better of BM25 and dense, per split.

``--relevance`` also reports, at a few ``min_relevance`` thresholds, how often
the product returns nothing for a category-5 question (adversarial: the answer
is not in the conversation) against how often a category 1-4 question loses
every evidence turn it had in its top 10.

The conversations are not in the repository (LoCoMo's licence is the
dataset's own): pass their paths. ``--smoke`` runs the bundled
tests/data/locomo_smoke.json with the hashing embedder (the suite does).

    .venv/bin/python scripts/bench_locomo.py /work/shared/data/locomo-tune/*.json \\
        [--held-back 42,43] [--embedder minilm] [--relevance]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, print_result, quantiles, smoke

from node.memory.embedding.embedder import EMBEDDER_NAMES
from node.memory.search.second_opinion import CHOICES as SECOND_OPINIONS
from tests.support.sessions.locomo import (
    ANSWERED,
    METHODS,
    LocomoStore,
    Scores,
    evaluate,
    load,
    summarise,
)

SMOKE_FILE = Path(__file__).resolve().parents[1] / "tests" / "data" / "locomo_smoke.json"
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5)


def relevance_counts(store: LocomoStore, questions: list[Any],
                     counts: dict[str, dict[float, list[int]]]) -> None:
    """Per threshold: [category-5 questions answered with nothing, category-5 questions,
    answered questions whose evidence in the top 10 is all filtered out, answered questions
    with some evidence in the top 10]."""
    for question in questions:
        hits = store.product_hits(question.text)
        ranked = [(store.by_crystal[hit.crystal.id], hit.relevance) for hit in hits]
        for threshold in THRESHOLDS:
            row = counts.setdefault("all", {}).setdefault(threshold, [0, 0, 0, 0])
            kept = [dia_id for dia_id, relevance in ranked if relevance >= threshold]
            if question.category == 5:
                row[0] += not kept
                row[1] += 1
            else:
                found = {dia_id for dia_id, _ in ranked} & set(question.evidence)
                if found:
                    row[3] += 1
                    row[2] += not (found & set(kept))


def timed_searches(store: LocomoStore, questions: list[Any]) -> list[float]:
    """Milliseconds of one product search per question (categories 1-4), in this process."""
    elapsed = []
    for question in questions:
        if question.category in ANSWERED:
            started = time.perf_counter()
            store.product_hits(question.text)
            elapsed.append((time.perf_counter() - started) * 1000)
    return elapsed


def print_table(split: str, report: dict[str, Any]) -> None:
    print(f"\n== {split} ==  R@5/R@10/nDCG@10 | session Hit@1/Hit@5")
    print(f"{'category':<13}{'n':>5}  " + "  ".join(f"{m:>35}" for m in METHODS))
    for category, entry in report.items():
        cells = "  ".join(
            f"{entry[m]['recall@5']:>6.3f}/{entry[m]['recall@10']:.3f}/{entry[m]['ndcg@10']:.3f}"
            f" | {entry[m]['session_hit@1']:.3f}/{entry[m]['session_hit@5']:.3f}" for m in METHODS)
        print(f"{category:<13}{entry['n']:>5}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="LoCoMo-shaped conversation files")
    parser.add_argument("--held-back", default="42,43",
                        help="comma-separated file stems reported apart as held-back")
    parser.add_argument("--embedder", default="minilm", choices=EMBEDDER_NAMES)
    parser.add_argument("--second-opinion", default="auto", choices=SECOND_OPINIONS)
    parser.add_argument("--relevance", action="store_true",
                        help="also measure min_relevance on category 5 against categories 1-4")
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), files=[SMOKE_FILE], embedder="hashing", second_opinion="none",
                      relevance=True)
    if not arguments.files:
        parser.error("name at least one LoCoMo-shaped file (e.g. /work/shared/data/locomo-tune/*.json)")
    held_back = {name.strip() for name in arguments.held_back.split(",") if name.strip()}
    scores: dict[str, Scores] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, dict[float, list[int]]] = {}
    ingest_rates: list[float] = []
    search_ms: list[float] = []
    for path in arguments.files:
        conversation = load(path)
        split = "held-back" if conversation.name in held_back else "tune"
        with tempfile.TemporaryDirectory(prefix="crystalmesh-bench-locomo-") as tmp:
            started = time.perf_counter()
            store = LocomoStore(conversation, arguments.embedder, Path(tmp), arguments.second_opinion)
            ingest_rates.append(len(conversation.turns) / (time.perf_counter() - started))
            try:
                evaluate(store, conversation.questions, scores[split])
                search_ms.extend(timed_searches(store, conversation.questions))
                if arguments.relevance:
                    relevance_counts(store, conversation.questions, counts.setdefault(split, {}))
            finally:
                store.close()
        print(f"{path.name}: {len(conversation.turns)} turns, {len(conversation.questions)} questions ({split})",
              flush=True)
    if len(scores) > 1:
        for entries in list(scores.values()):
            for key, rows in entries.items():
                scores["all"][key].extend(rows)
    report = {split: summarise(entries) for split, entries in scores.items()}
    result: dict[str, Any] = {"embedder": arguments.embedder, "files": [path.name for path in arguments.files],
                              "held_back": sorted(held_back), "ingest_turns_per_s": quantiles(ingest_rates, (50,)),
                              "search_ms": quantiles(search_ms, (50, 99), 2)}
    for split, entry in report.items():
        print_table(split, entry)
        overall = entry["overall"]
        best = max(overall["bm25"]["ndcg@10"], overall["dense"]["ndcg@10"])
        result[split] = entry
        result[split]["ratio"] = round(overall["product"]["ndcg@10"] / best, 4) if best else None
    if arguments.relevance:
        result["relevance"] = {}
        for split, by_threshold in counts.items():
            rows = by_threshold["all"]
            print(f"\n== min_relevance ({split}) ==  threshold: cat-5 answered with nothing / cat 1-4 answer dropped")
            result["relevance"][split] = {}
            for threshold, (empty, adversarial, dropped, found) in sorted(rows.items()):
                abstain = empty / adversarial if adversarial else None
                drop = dropped / found if found else None
                print(f"  {threshold:.2f}: {empty}/{adversarial} = {abstain or 0:.3f}   {dropped}/{found} = {drop or 0:.3f}")
                result["relevance"][split][str(threshold)] = {"abstain_cat5": abstain, "drop_cat1_4": drop}
    print_result(result)


if __name__ == "__main__":
    main()
