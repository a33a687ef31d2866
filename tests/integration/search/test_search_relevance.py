"""Every hit carries a calibrated relevance in [0, 1]; ``min_relevance`` leaves out the hits below it.

Real store, FTS5 and HNSW index (the hashing embedder: the calibration itself is
checked in tests/unit/memory/search/test_relevance.py and measured on LoCoMo by
scripts/bench_locomo.py --relevance).
"""

from __future__ import annotations

import math

import pytest

from node.memory.facade import Memory, SearchRequest
from node.memory.search.pipeline import MemoryInputError

TEXTS = [
    "the release checklist lives in docs/release.md",
    "the release train leaves every second Tuesday",
    "my sister's bakery in Lisbon opens at seven",
    "the staging database is backed up nightly at 02:00",
    "Shadow the puppy chewed my running shoes",
]


def _filled(memory: Memory) -> Memory:
    for text in TEXTS:
        memory.add(text)
    return memory


def test_every_hit_has_a_relevance_and_the_filter_keeps_exactly_those_above_it(memory: Memory) -> None:
    _filled(memory)
    hits = memory.search(SearchRequest("release checklist", k=5, record_access=False))
    assert len(hits) == 5
    relevances = [hit.relevance for hit in hits]
    assert all(0.0 <= value <= 1.0 for value in relevances)
    assert hits[0].crystal.text == TEXTS[0]
    assert hits[0].relevance > hits[-1].relevance
    assert hits[0].to_dict()["relevance"] == hits[0].relevance
    threshold = sorted(relevances)[2]
    kept = memory.search(SearchRequest("release checklist", k=5, record_access=False, min_relevance=threshold))
    assert [hit.crystal.id for hit in kept] == [hit.crystal.id for hit in hits if hit.relevance >= threshold]
    assert 0 < len(kept) < len(hits)


def test_nothing_above_the_threshold_returns_nothing_and_records_no_access(memory: Memory) -> None:
    _filled(memory)
    top = memory.search(SearchRequest("release checklist", k=5, record_access=False))[0].relevance
    assert top < 1.0
    assert memory.search(SearchRequest("release checklist", k=5, min_relevance=math.nextafter(top, 1.0))) == []
    assert all(memory.store.get(hit.crystal.id).access_count == 0
               for hit in memory.search(SearchRequest("release checklist", k=5, record_access=False)))


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_a_min_relevance_outside_0_1_is_refused(memory: Memory, bad: float) -> None:
    _filled(memory)
    with pytest.raises(MemoryInputError, match="min_relevance"):
        memory.search(SearchRequest("release checklist", min_relevance=bad))
