"""Memory.search does no harm to reworded queries: without lexical evidence it ranks as dense search.

Real store, FTS5 and HNSW index with MiniLM over the retrieval set's memories
(tests/data/retrieval_v2.json). A query whose lexical confidence is below
``FusionParams.confidence_floor`` gives BM25 no weight and is not re-ordered
by query-term coverage, so the hits come out in the order of their dense
(cosine) scores; see docs/retrieval-tuning.md, "Third pass".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from node.config import load_config
from node.memory.facade import Memory, SearchRequest
from node.memory.search.compound import split_clauses
from node.memory.search.fusion import fts_query, lexical_evidence
from node.memory.search.lexical import CONFIDENCE_DEPTH, lexical_confidence
from node.memory.search.second_opinion import opinion_of


def _confidence(memory: Memory, query: str) -> float:
    rows = memory.store.fts(fts_query(query), CONFIDENCE_DEPTH)
    texts = memory.store.search_rows([rowid for rowid, _ in rows])
    return lexical_confidence(query, [texts[rowid].text for rowid, _ in rows])


def _dense_side(memory: Memory, query: str) -> list[tuple[int, float]]:
    """Dense search as the product does it: the index's 50 nearest to the query's own vector,
    re-scored by the second opinion (node.memory.search.second_opinion) the store has by default."""
    assert memory.second is not None
    return opinion_of(memory.db, memory.second, query, memory.index.query(memory.embed([query])[0], 50))


def _assert_dense_order(memory: Memory, query: str) -> list[str]:
    assert lexical_evidence(_confidence(memory, query)) == 0.0  # the premise: no lexical evidence
    hits = memory.search(SearchRequest(query, k=10, record_access=False))
    dense = [hit.dense for hit in hits]
    assert None not in dense
    # Importance and recency only break near-ties; these memories were added together.
    assert dense == sorted(dense, reverse=True), [hit.crystal.text[:40] for hit in hits]
    return [hit.crystal.text for hit in hits]


def test_a_reworded_query_ranks_as_dense_search(retrieval_memory: Memory) -> None:
    # "Japan" is the only shared word; BM25 weight on it put the passport above the hotel.
    texts = _assert_dense_order(retrieval_memory, "where am I sleeping in the old imperial capital of Japan")
    assert any(text.startswith("Kyoto hotel") for text in texts[:2]), texts[:3]


def test_a_compound_question_without_lexical_evidence_is_not_reordered(retrieval_memory: Memory) -> None:
    query = "which app tracks my running, what distance did I reach"
    assert split_clauses(query)
    texts = _assert_dense_order(retrieval_memory, query)
    # Coverage re-ordering on the incidental word "app" put the habit tracker first.
    assert texts[0].startswith("My 5 km personal best"), texts[:2]


@pytest.mark.parametrize(
    "query",
    ["which app tracks my running, what distance did I reach",
     "what did the physician find in spring and which pill was prescribed"],
)
def test_a_reworded_compound_question_is_exactly_dense_search(retrieval_memory: Memory, query: str) -> None:
    """Without lexical evidence, hits and their scores are dense search's for the query's own vector
    (with the default second opinion).

    Two things used to move them: the clause vectors merged into the dense list,
    and the query embedded in one batch with its clauses (the int8 embedder
    quantises activations per batch, so that vector was not the query's own).
    """
    assert split_clauses(query) and lexical_evidence(_confidence(retrieval_memory, query)) == 0.0
    hits = retrieval_memory.search(SearchRequest(query, k=10, record_access=False))
    nearest = _dense_side(retrieval_memory, query)[:10]
    texts = retrieval_memory.store.search_rows([rowid for rowid, _ in nearest])
    assert [hit.crystal.text for hit in hits] == [texts[rowid].text for rowid, _ in nearest]
    assert [hit.dense for hit in hits] == pytest.approx([cosine for _, cosine in nearest], abs=1e-6)


def test_an_all_caps_word_is_not_a_code_that_ranks_first(tmp_path: Path) -> None:
    """``HTTPS`` in a reworded question neither buys BM25 weight nor puts the memories naming it first."""
    memory = Memory(load_config(tmp_path / "node", overrides={"memory": {"embedder": "minilm"}}, environ={}))
    try:
        memory.add_crystals([memory.prepare(text) for text in (
            "Certificates for HTTPS on the public gateway are renewed by cert-manager every 60 days.",
            "The HTTPS redirect on the marketing site is done by Cloudflare page rules.",
            "Partner integrations were rejected overnight because the TLS certificate expired on 3 May.",
            "We moved the office plants to the window side in April.",
        )])
        query = "when were partner integrations refused because the HTTPS credential lapsed"
        hits = memory.search(SearchRequest(query, k=4, record_access=False))
        assert hits[0].crystal.text.startswith("Partner integrations"), [hit.crystal.text[:30] for hit in hits]
    finally:
        memory.close()
