"""Simulated weeks of a node's memory (seeds 003/004): time is injected, nothing sleeps.

Shows, on real data dirs and the real code path (``Memory.consolidate``,
``Learning``, tiers, testament files):

1. episodes folding into facts, and a new episode reinforcing a fact;
2. facts surviving in proportion to their evidence (3 vs 20 episodes);
3. a warning surviving everything (eight weeks, a "wrong" vote, purges);
4. energy tiers moving as seed 004's table says;
5. a testament carried to a fresh node and ranking there below local knowledge.

Usage: ``python scripts/memory_weeks.py [--embedder hashing|minilm] [--keep DIR]``.
The last line is a JSON summary; tests/integration/memory/test_memory_weeks.py runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from node.config import load_config
from node.crystals.model import Lifecycle, SemanticType, now_ms
from node.memory.facade import Memory
from node.memory.learning.testament_io import export_testament, import_testament
from node.memory.learning.tiers import end_session, run_tiers
from node.memory.search.pipeline import SearchRequest
from protocol.identity import Identity

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS

DEPLOY = [
    "staging deploy failed on friday: the users table migration held a lock (run {i})",
    "friday staging deploy failed because the users table migration held a lock, attempt {i}",
    "the staging deploy failed friday again: users table migration lock, try {i}",
]
BACKUP = "nightly backup to the blue bucket finished slowly, night {i}"
WARNING = "never pay invoices from wallet 0xdead: it is a honeypot, payments cannot be refunded"


def open_node(root: Path, name: str, embedder: str, **memory: Any) -> Memory:
    config = load_config(root / name, overrides={"memory": {"embedder": embedder, **memory}}, environ={})
    config.data_dir.mkdir(parents=True, exist_ok=True)
    return Memory(config)


def live(memory: Memory, crystal_id: str) -> bool:
    return memory.store.get(crystal_id).lifecycle not in (Lifecycle.EXPIRED, Lifecycle.ARCHIVED)


def episode(memory: Memory, text: str, at_ms: int) -> str:
    return memory.add(text, semantic_type=SemanticType.EPISODE, created_at_ms=at_ms).id


def learning_part(root: Path, embedder: str, start: int, log: list[dict[str, Any]]) -> dict[str, Any]:
    """Node A over eight weeks: facts from episodes, evidence-proportional survival, a warning."""
    node = open_node(root, "alpha", embedder)
    try:
        warning = node.add(WARNING, semantic_type=SemanticType.WARNING, created_at_ms=start).id
        for i in range(20):
            episode(node, DEPLOY[i % 3].format(i=i), start + i * HOUR_MS)
        for i in range(3):
            episode(node, BACKUP.format(i=i), start + i * HOUR_MS)
        node.consolidate(now=start + DAY_MS)
        facts = {f.text: f.id for f in node.store.list_crystals(limit=50) if f.semantic_type is SemanticType.FACT}
        deploy = next(i for t, i in facts.items() if "deploy" in t)
        backup = next(i for t, i in facts.items() if "backup" in t)
        counts = {k: node.learning.knowledge.get(v).episode_count for k, v in (("deploy", deploy), ("backup", backup))}
        log.append({"day": 1, "event": "facts born", "episode_counts": counts})
        node.learning.feedback(warning, "wrong", at_ms=start + DAY_MS)
        evicted_on: dict[str, int] = {}
        for day in range(2, 57):
            at = start + day * DAY_MS
            if day == 8:  # a new similar episode reinforces instead of duplicating
                episode(node, DEPLOY[0].format(i=100), at - HOUR_MS)
            node.consolidate(now=at, purge=True)
            for name, fact_id in (("deploy", deploy), ("backup", backup)):
                if name not in evicted_on and not node.learning.knowledge.get(fact_id):
                    evicted_on[name] = day
            if day == 8:
                log.append({"day": 8, "event": "deploy fact reinforced",
                            "episode_count": node.learning.knowledge.get(deploy).episode_count})
        warning_crystal = node.store.get(warning)
        warning_confidence = node.learning.confidences([warning_crystal], start + 56 * DAY_MS)[warning]
        log.append({"day": 56, "event": "after eight weeks", "evicted_on_day": evicted_on,
                    "warning_lifecycle": warning_crystal.lifecycle.value,
                    "warning_confidence": round(warning_confidence, 4)})
        return {"counts": counts, "evicted_on_day": evicted_on, "warning_alive": live(node, warning),
                "warning_confidence": warning_confidence}
    finally:
        node.close()


def tiers_part(root: Path, embedder: str, start: int, log: list[dict[str, Any]]) -> dict[str, Any]:
    """Node E (policy energy): the seed-004 table hour by hour."""
    node = open_node(root, "energy", embedder, policy="energy")
    try:
        ids = {name: node.add(f"energy probe {name}: {name} is what this memory is about",
                              created_at_ms=start).id
               for name in ("idle", "hot", "session", "long")}
        tier_of = lambda: {n: _tier(node, i) for n, i in ids.items()}  # noqa: E731
        node.store.record_access([ids["hot"], ids["long"]], start)  # one access at once: 1 + 1 = 2.0
        run_tiers(node, node.learning, start)
        log.append({"hour": 0, "event": "one access at birth", "tiers": tier_of()})
        node.store.record_access([ids["session"]], start + HOUR_MS)  # e^-0.5 + 1 = 1.61 < 2.0
        run_tiers(node, node.learning, start + HOUR_MS)
        before_boundary = tier_of()["session"]
        end_session(node, node.learning, start + HOUR_MS)  # ≥ 1.5 at a boundary
        log.append({"hour": 1, "event": "session end", "session_before": before_boundary, "tiers": tier_of()})
        for hour in range(2, 6):  # four accesses push "long" past 5.0 in short-term
            node.store.record_access([ids["long"]], start + hour * HOUR_MS)
            run_tiers(node, node.learning, start + hour * HOUR_MS)
        run_tiers(node, node.learning, start + 6 * HOUR_MS)
        tiers = tier_of()
        status = node.learning.knowledge.tier_counts()
        log.append({"hour": 6, "event": "idle expired, long promoted", "tiers": tiers, "status": status})
        return {"tiers": tiers, "before_boundary": before_boundary, "status": status}
    finally:
        node.close()


def _tier(node: Memory, crystal_id: str) -> str:
    if not live(node, crystal_id):
        return "expired"
    state = node.learning.knowledge.energy_states().get(crystal_id)
    return state.tier.value if state else "working"


def testament_part(root: Path, embedder: str, start: int, log: list[dict[str, Any]]) -> dict[str, Any]:
    """A testament from a node that learned about deploys, carried to a fresh node with its own fact."""
    elder, heir = open_node(root, "elder", embedder), open_node(root, "heir", embedder)
    try:
        for i in range(4):
            episode(elder, DEPLOY[i % 3].format(i=i), start + i * HOUR_MS)
        elder.add(WARNING, semantic_type=SemanticType.WARNING, created_at_ms=start)
        elder.consolidate(now=start + DAY_MS)
        file = root / "elder.testament"
        exported = export_testament(elder, elder.learning, Identity.generate(), file, at_ms=start + DAY_MS)
        exported.pop("data")
        for i in range(3):
            episode(heir, f"our friday staging deploy failed, users table migration lock seen here, case {i}",
                    start + i * HOUR_MS)
        heir.consolidate(now=start + DAY_MS)
        imported = import_testament(heir, heir.learning, file.read_bytes(), at_ms=start + DAY_MS)
        hits = heir.search(SearchRequest("staging deploy failed friday users table migration lock", k=10,
                                         semantic_types=("fact",), record_access=False))
        ranking = [{"text": h.crystal.text[:60], "origin": h.crystal.origin.value,
                    "confidence": round(heir.learning.confidences([h.crystal])[h.crystal.id], 4),
                    "score": round(h.score, 4)} for h in hits]
        warnings = [c.text for c in heir.store.list_crystals(limit=50) if c.semantic_type is SemanticType.WARNING]
        log.append({"event": "testament", "exported": exported, "imported": imported, "heir_ranking": ranking})
        return {"exported": exported, "imported": imported, "ranking": ranking, "heir_warnings": warnings}
    finally:
        elder.close()
        heir.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"])
    parser.add_argument("--keep", type=Path, default=None, help="Keep the data dirs here.")
    args = parser.parse_args(argv)
    start = now_ms() - 9 * WEEK_MS  # the weeks end before now, so search's "now" is after them
    log: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        summary = {
            "learning": learning_part(root, args.embedder, start, log),
            "tiers": tiers_part(root, args.embedder, start, log),
            # the heir searches at the real clock: its part ends just before now
            "testament": testament_part(root, args.embedder, now_ms() - 2 * DAY_MS, log),
        }
    for entry in log:
        print(json.dumps(entry, default=str))
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
