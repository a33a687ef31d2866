"""Memory.search ranks the memory naming the query's identifier first, over near-twins."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from node.memory.facade import Memory, SearchRequest

DATA = Path(__file__).resolve().parents[2] / "data" / "retrieval_v2.json"

TWINS = [
    "ERR-4091 from the payments gateway means the idempotency key was reused with a different body.",
    "ERR-4019 from the payments gateway means the idempotency key expired after 24 hours.",
    "Mobile app v2.3.0 shipped on 8 April with the new confirmation screen.",
    "Mobile app v2.3.1 shipped on 15 April as a hotfix for the camera crash.",
    "Mobile app v2.3.10 shipped much later with only translations.",
    "Broke grandma's old ceramic bowl during the move; what broke was the rim.",
    "db-prod-03 is the primary Postgres for the ledger.",
    "db-prod-08 is the analytics replica of the ledger database.",
]


@pytest.mark.parametrize(
    ("query", "must_contain"),
    [
        ("ERR-4019", "ERR-4019"),
        ("what does ERR-4091 mean", "ERR-4091"),
        ("what broke in v2.3.1", "v2.3.1 shipped"),
        ("v2.3.0", "v2.3.0"),
        ("db-prod-08 replica", "db-prod-08"),
    ],
)
def test_exact_identifier_ranks_first(memory: Memory, query: str, must_contain: str) -> None:
    for text in TWINS:
        memory.add(text)
    hits = memory.search(SearchRequest(query=query, k=5, record_access=False))
    assert hits, query
    assert must_contain in hits[0].crystal.text, [hit.crystal.text for hit in hits]


def test_retrieval_v2_shape() -> None:
    data = json.loads(DATA.read_text())
    ids = {memory["id"] for memory in data["memories"]}
    assert len(ids) == len(data["memories"]) >= 400
    queries = data["queries"]
    assert len(queries) >= 250
    assert {q["kind"] for q in queries} == {
        "paraphrase",
        "identifier",
        "keyword",
        "multi-hop",
        "negation-trap",
    }
    assert len({q["id"] for q in queries}) == len(queries)
    for query in queries:
        assert set(query["relevant"]) <= ids, query["id"]
        assert set(query["relevant"].values()) <= {1, 2} and 2 in query["relevant"].values(), query[
            "id"
        ]
        expected = (
            "tune" if hashlib.sha256(query["id"].encode()).digest()[0] % 2 == 0 else "heldout"
        )
        assert query["split"] == expected, query["id"]
