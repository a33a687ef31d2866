"""The retrieval evaluation of the product's ``Memory.search`` on a real store and index.

The hand-written v2 set (tests/data/retrieval_v2.json: 412 memories, 285 judged
queries) goes into a real ``Memory`` (SQLite + FTS5 + hnswlib) through
tests/support/retrieval.py's ``Bench`` (the harness scripts/bench_retrieval.py reports with); each query runs through ``Memory.search``
and through the same store's dense-only (HNSW) and BM25-only (FTS5) paths. The
product's hybrid search must beat both overall on the held-out half, with the
real MiniLM embedder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import retrieval


@pytest.mark.slow
def test_product_search_beats_dense_and_bm25_on_the_held_out_half(tmp_path: Path) -> None:
    memories, queries = retrieval.load()
    held_out = [query for query in queries if query.split == "heldout"]
    assert len(memories) >= 400 and len(queries) >= 250 and len(held_out) >= 100
    index = retrieval.Bench(memories, "minilm", tmp_path / "node")
    try:
        report = retrieval.evaluate(index, held_out)
    finally:
        index.close()
    overall = report["heldout"]["overall"]
    hybrid = overall["hybrid"]["ndcg@10"]
    assert hybrid > overall["dense"]["ndcg@10"], overall
    assert hybrid > overall["bm25"]["ndcg@10"], overall
    assert report["heldout"]["identifier"]["hybrid"]["ndcg@10"] >= 0.9, report["heldout"]["identifier"]
    # Kinds where the product wins outright on the held-out half (docs/benchmarks.md,
    # "Retrieval v2"); paraphrase (0.749 vs dense 0.775) and keyword (a tie at 0.997) do not yet,
    # and are not asserted (on the later sets, below, every kind is).
    for kind in ("identifier", "multi-hop", "negation-trap"):
        entry = report["heldout"][kind]
        assert entry["hybrid"]["ndcg@10"] > entry["dense"]["ndcg@10"], (kind, entry)
        assert entry["hybrid"]["ndcg@10"] > entry["bm25"]["ndcg@10"], (kind, entry)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["retrieval_fresh4", "retrieval_fresh5"])
def test_product_search_beats_dense_and_bm25_on_every_kind_of_the_later_sets(tmp_path: Path, name: str) -> None:
    """The issue's bar, held. tests/data/retrieval_fresh5.json (439 memories) was evaluated once,
    after the fusion change of stop 23; retrieval_fresh4.json was the held-out set of that
    change's first form and is tune data since (docs/retrieval-tuning.md, "Agreement of the two
    lists"). On both, the product beats dense-only and BM25-only overall and on every kind."""
    memories, queries = retrieval.load(retrieval.DATA_PATH.with_name(f"{name}.json"))
    index = retrieval.Bench(memories, "minilm", tmp_path / "node")
    try:
        assert index.memory.second is not None
        report = retrieval.evaluate(index, queries)
    finally:
        index.close()
    kinds = report["heldout"]
    assert set(kinds) == {"overall", "paraphrase", "identifier", "keyword", "multi-hop", "negation-trap"}
    for kind, entry in kinds.items():
        assert entry["hybrid"]["ndcg@10"] > entry["dense"]["ndcg@10"], (kind, entry)
        assert entry["hybrid"]["ndcg@10"] > entry["bm25"]["ndcg@10"], (kind, entry)


@pytest.mark.slow
def test_the_second_opinion_lifts_reworded_questions_above_dense_search(tmp_path: Path) -> None:
    """On the tune half, where it was chosen (docs/retrieval-tuning.md, "Second opinion"): with the
    default second opinion (paraphrase-MiniLM-L3 beside MiniLM) the product ranks reworded
    questions better than dense search alone; without it, it only ties. Fusion keeps all of that
    gain: the lexical list counts only as far as its best hit agrees with the dense list's meaning
    (``fusion.agreement``), so words a reworded question shares with an unrelated memory cost it
    nothing (docs/retrieval-tuning.md, "Agreement of the two lists")."""
    memories, queries = retrieval.load()
    tune = [query for query in queries if query.split == "tune"]
    index = retrieval.Bench(memories, "minilm", tmp_path / "node")
    try:
        assert index.memory.second is not None
        report = retrieval.evaluate(index, tune)
    finally:
        index.close()
    paraphrase = report["tune"]["paraphrase"]
    assert paraphrase["hybrid"]["ndcg@10"] > paraphrase["dense"]["ndcg@10"] + 0.005, paraphrase
    assert paraphrase["dense2"]["ndcg@10"] > paraphrase["dense"]["ndcg@10"], paraphrase
    assert paraphrase["hybrid"]["ndcg@10"] >= paraphrase["dense2"]["ndcg@10"], paraphrase
    for kind, entry in report["tune"].items():
        assert entry["hybrid"]["ndcg@10"] > entry["dense"]["ndcg@10"], (kind, entry)
        assert entry["hybrid"]["ndcg@10"] > entry["bm25"]["ndcg@10"], (kind, entry)


def test_oracle_headroom_is_never_below_either_list(tmp_path: Path) -> None:
    """``--oracle`` (per-query best fixed-weight fusion) bounds what re-weighting the two lists can reach.

    Weight 0 must reproduce the dense ranking and weight 1 the BM25 one, so per query the
    oracle is at least as good as both; a grid without its ends, or fusion of other
    lists than the ones compared, breaks this.
    """
    memories, queries = retrieval.load()
    index = retrieval.Bench(memories, "hashing", tmp_path / "node")
    try:
        lifted = 0
        for query in queries:
            dense = retrieval.ndcg(index.dense(query.text), query.relevant)
            bm25 = retrieval.ndcg(index.bm25(query.text), query.relevant)
            best = retrieval.oracle(index, query)[0]
            assert best >= max(dense, bm25) - 1e-12, (query.id, best, dense, bm25)
            lifted += best > max(dense, bm25) + 1e-9
        report = retrieval.evaluate(index, queries[:20], with_oracle=True)
    finally:
        index.close()
    assert lifted > 0  # some query gains from a weight strictly between the ends
    assert set(report["all"]["overall"]) == {"n", "hybrid", "dense", "bm25", "oracle"}
