"""The hand-written held-out retrieval sets (tests/data/retrieval_fresh*.json, stop 20).

Structure only: each file loads through the evaluation harness's own ``load()`` (tests/support/retrieval.py), its ids,
kinds and counts are what docs/benchmarks.md says, and it is exactly what its
tests/data/<set>/build.py produces from the hand-written txt files (so the data and
its source cannot drift apart). Nothing here evaluates retrieval on them: the sets
are kept unseen for the coordinator's final run.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import retrieval

ROOT = Path(__file__).resolve().parents[4]
KINDS = {"paraphrase", "identifier", "keyword", "multi-hop", "negation-trap"}
# set name -> (minimum memories, minimum queries per kind)
SETS = {
    "retrieval_fresh": (
        240,
        {"paraphrase": 60, "identifier": 40, "keyword": 25, "multi-hop": 20, "negation-trap": 25},
    ),
    "retrieval_fresh2": (
        220,
        {"paraphrase": 70, "identifier": 35, "keyword": 25, "multi-hop": 20, "negation-trap": 25},
    ),
    "retrieval_fresh3": (
        230,
        {"paraphrase": 80, "identifier": 45, "keyword": 30, "multi-hop": 25, "negation-trap": 30},
    ),
    "retrieval_fresh4": (
        300,
        {"paraphrase": 90, "identifier": 50, "keyword": 34, "multi-hop": 26, "negation-trap": 34},
    ),
    "retrieval_fresh5": (
        400,
        {"paraphrase": 90, "identifier": 50, "keyword": 34, "multi-hop": 26, "negation-trap": 34},
    ),
}


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _build(name: str) -> ModuleType:
    return _module(ROOT / "tests" / "data" / name / "build.py", f"{name}_build")


def _data(name: str) -> Path:
    return ROOT / "tests" / "data" / f"{name}.json"


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_bench_loader_reads_the_set(name: str) -> None:
    minimum_memories, minimum = SETS[name]
    memories, queries = retrieval.load(_data(name))
    ids = [m["id"] for m in memories]
    assert len(ids) == len(set(ids)) >= minimum_memories
    # the store dedups identical texts, which would silently merge two judged memories
    assert len({m["text"] for m in memories}) == len(memories)
    assert len({q.id for q in queries}) == len(queries)
    assert len({q.text for q in queries}) == len(queries)
    kinds = Counter(q.kind for q in queries)
    assert set(kinds) == KINDS
    assert all(kinds[kind] >= count for kind, count in minimum.items()), kinds
    assert {q.split for q in queries} == {"heldout"}
    known = set(ids)
    for query in queries:
        assert query.relevant and set(query.relevant) <= known, query.id
        assert set(query.relevant.values()) <= {1, 2}, query.id
        assert 2 in query.relevant.values(), query.id
        if query.kind == "multi-hop":
            assert list(query.relevant.values()).count(2) >= 2, query.id


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_json_is_what_build_py_makes_from_the_txt_files(name: str) -> None:
    build = _build(name)
    data, _report = build.build()
    assert build.render(data) == _data(name).read_text(), (
        f"tests/data/{name}.json is stale: run python tests/data/{name}/build.py"
    )
    assert re.search(r"\bstop 2[0-9]\b", data["description"]) and "never tuned on" in data["description"]


@pytest.mark.parametrize("name", sorted(SETS))
def test_paraphrase_queries_share_no_content_word_with_their_answers(name: str) -> None:
    build = _build(name)
    data, _report = build.build()
    texts = {m["id"]: m["text"] for m in data["memories"]}
    for query in data["queries"]:
        if query["kind"] != "paraphrase":
            continue
        for memory_id, grade in query["relevant"].items():
            if grade == 2:
                shared = build.shared_words(query["text"], texts[memory_id])
                assert not shared, (query["id"], memory_id, shared)


def test_the_second_set_is_a_different_world_from_the_first() -> None:
    first = {m["text"] for m in _build("retrieval_fresh").build()[0]["memories"]}
    second = _build("retrieval_fresh2").build()[0]
    assert not first & {m["text"] for m in second["memories"]}
    assert (
        "after the second set (retrieval_fresh.json) had been used for tuning"
        in second["description"]
    )


def test_the_third_set_is_a_different_world_from_the_first_two() -> None:
    earlier = {
        m["text"]
        for name in ("retrieval_fresh", "retrieval_fresh2")
        for m in _build(name).build()[0]["memories"]
    }
    third = _build("retrieval_fresh3").build()[0]
    assert not earlier & {m["text"] for m in third["memories"]}
    assert "after the two stop 20 sets" in third["description"]


@pytest.mark.parametrize(
    ("name", "after"), [("retrieval_fresh4", "after the stop 22 set"), ("retrieval_fresh5", "after the fourth set")]
)
def test_the_later_sets_are_different_worlds_from_the_earlier_ones(name: str, after: str) -> None:
    earlier = {
        m["text"]
        for other in sorted(SETS)
        if other < name
        for m in _build(other).build()[0]["memories"]
    }
    later = _build(name).build()[0]
    assert not earlier & {m["text"] for m in later["memories"]}
    assert after in later["description"]
    # written in two halves by two writers: work (w_) and life (h_) ids never collide
    assert {m["id"][:2] for m in later["memories"]} == {"w_", "h_"}


@pytest.mark.parametrize("name", ["retrieval_fresh3", "retrieval_fresh4", "retrieval_fresh5"])
def test_later_sets_have_negation_traps_with_and_without_a_negation_word(name: str) -> None:
    # the brief: about half say "not / never / other than / except", half do not
    negation = re.compile(r"\b(not|no|never|except|other than)\b|n't\b")
    traps = [
        q["text"]
        for q in _build(name).build()[0]["queries"]
        if q["kind"] == "negation-trap"
    ]
    said = [text for text in traps if negation.search(text.lower())]
    assert 0.3 * len(traps) <= len(said) <= 0.7 * len(traps), (len(said), len(traps))


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_overlap_check_sees_plurals_and_possessives_but_not_stopwords(name: str) -> None:
    build = _build(name)
    memory = "The carrier feed sent a batch; the cache and the queries were dropped."
    query = "Which batches did the carrier's feeds drop from our caches and query?"
    # "drop" vs "dropped" is left to the printed 5-letter-prefix report, by design
    assert build.shared_words(query, memory) == {"batches", "carrier", "feeds", "caches", "query"}
    assert build.shared_words("what did they do with it", memory) == set()
