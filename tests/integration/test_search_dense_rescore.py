"""Memory.search re-scores its dense candidates against the store's mean vector.

Real store, FTS5 and HNSW index with MiniLM over the retrieval set's memories
(tests/data/retrieval_v2.json). For a reworded query without lexical evidence
the hits come out in the order of ``cos(q, d − μ)``, ``μ`` the mean of the
store's unit embeddings, computed here from the store's own rows, not from the
index; see node/crystals/dense_rescore.py and docs/benchmarks.md, "Fourth pass".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from node.config import load_config
from node.memory.facade import Memory, SearchRequest

DATA = Path(__file__).resolve().parents[1] / "data" / "retrieval_v2.json"
QUERY = "which firm is hauling my belongings to the new place"
MOVERS = "Booked the movers"


@pytest.fixture(scope="module")
def minilm_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    data_dir = tmp_path_factory.mktemp("rescore") / "node"
    memory = Memory(load_config(data_dir, overrides={"memory": {"embedder": "minilm"}}, environ={}))
    memories = json.loads(DATA.read_text())["memories"]
    memory.add_crystals([memory.prepare(item["text"]) for item in memories])
    try:
        yield memory
    finally:
        memory.close()


def _store_vectors(memory: Memory) -> dict[int, np.ndarray]:
    vectors: dict[int, np.ndarray] = {}
    for rowids, batch in memory.store.vectors():
        for rowid, vector in zip(rowids, batch, strict=True):
            vectors[int(rowid)] = np.asarray(vector, dtype=np.float64) / np.linalg.norm(vector)
    return vectors


def test_a_reworded_query_ranks_by_cosine_to_the_centred_memories(minilm_memory: Memory) -> None:
    vectors = _store_vectors(minilm_memory)
    mean = np.mean(list(vectors.values()), axis=0)
    query = np.asarray(minilm_memory.embed([QUERY])[0], dtype=np.float64)
    rowid_of = {text: rowid for rowid, text in (
        (rowid, row.text) for rowid, row in minilm_memory.store.search_rows(list(vectors)).items())}

    def centred(text: str) -> float:
        vector = vectors[rowid_of[text]] - mean
        return float(vector @ query / np.linalg.norm(vector))

    hits = minilm_memory.search(SearchRequest(QUERY, k=10, record_access=False))
    texts = [hit.crystal.text for hit in hits]
    scores = [centred(text) for text in texts]
    assert scores == sorted(scores, reverse=True), [text[:40] for text in texts]
    # Plain cosine puts the movers 5th (behind the donated clothes, the moving-day journal ...);
    # without the common component of the store it comes up.
    movers = next(rowid for text, rowid in rowid_of.items() if text.startswith(MOVERS))
    raw_rank = [rowid for rowid, _ in minilm_memory.index.query(query, 10)].index(movers)
    rank = next(i for i, text in enumerate(texts) if text.startswith(MOVERS))
    assert rank < raw_rank, (rank, raw_rank)


def test_the_mean_is_recomputed_from_the_index_after_a_reopen(tmp_path: Path) -> None:
    # Nothing is persisted: the loaded index yields the mean again, equal to the store's,
    # and search answers exactly as before the restart.
    config = load_config(tmp_path / "node", overrides={"memory": {"embedder": "minilm"}}, environ={})
    texts = [item["text"] for item in json.loads(DATA.read_text())["memories"][:80]]
    memory = Memory(config)
    memory.add_crystals([memory.prepare(text) for text in texts])
    before = [hit.crystal.id for hit in memory.search(SearchRequest(QUERY, k=10, record_access=False))]
    memory.close()
    reopened = Memory(config)
    try:
        assert reopened.index.open(reopened.store) == "loaded"
        mean = reopened.index.mean_vector()
        assert mean is not None
        assert mean == pytest.approx(np.mean(list(_store_vectors(reopened).values()), axis=0), abs=1e-5)
        after = [hit.crystal.id for hit in reopened.search(SearchRequest(QUERY, k=10, record_access=False))]
        assert after == before
    finally:
        reopened.close()
