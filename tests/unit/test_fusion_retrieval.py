"""The retrieval evaluation with MiniLM: hybrid must not lose to dense or BM25 on either query kind."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from node.memory.embedder import MiniLMEmbedder

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_retrieval.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_retrieval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_retrieval_set_shape() -> None:
    data = json.loads(_bench().DATA_PATH.read_text())
    memory_ids = {memory["id"] for memory in data["memories"]}
    assert len(memory_ids) == len(data["memories"]) >= 150
    assert len(data["queries"]) >= 60
    for query in data["queries"]:
        assert query["kind"] in ("paraphrase", "identifier") and query["split"] in ("tune", "heldout")
        assert set(query["relevant"]) <= memory_ids and 2 in query["relevant"].values()


@pytest.mark.slow
def test_hybrid_beats_each_single_method_on_the_heldout_split(tmp_path: Path) -> None:
    bench = _bench()
    data = json.loads(bench.DATA_PATH.read_text())
    index = bench.RetrievalIndex(data["memories"], MiniLMEmbedder(cache_dir=tmp_path))
    results = bench.evaluate(bench.gather(index, bench.load_queries(data), 50), index.doc_freq)
    heldout = results["heldout"]
    for kind in ("paraphrase", "identifier"):
        assert heldout[kind]["hybrid"] >= heldout[kind]["dense"], kind
        assert heldout[kind]["hybrid"] >= heldout[kind]["bm25"], kind
    assert heldout["all"]["hybrid"] > max(heldout["all"]["dense"], heldout["all"]["bm25"])
