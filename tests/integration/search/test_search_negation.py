"""A selection question's negated phrase counts against memories, through ``Memory.search``.

Real SQLite + FTS5 + HNSW and the real MiniLM embedder: both lists favour the
memory that names what the question rules out.
"""

from __future__ import annotations

import pytest

from node.config import NodeConfig
from node.memory.facade import Memory, SearchRequest

MEMORIES = [
    "Prod bastion is bastion-mtl-1 at 10.40.0.5; SSH only through Teleport, sessions recorded.",
    "Staging bastion is bastion-stg-1 at 10.41.0.5; plain SSH with keys from the staging Vault.",
    "Flight TP668 to Amsterdam; the return is TP669 on 27 October at 19:40.",
    "Flight TP686 is the Lisbon to Frankfurt flight I took for the payments conference.",
    "Airflow in prod is 2.9.3 since 20 May; it fixed the scheduler deadlock.",
    "Staging tried Airflow 2.10.0 in July; we held it back because the provider broke pod logs.",
    "Commit 7e2d41c added lock_timeout and statement_timeout to the migration bot.",
    "Commit 7e2d14c bumped the migration bot's Go toolchain; nothing to do with lock timeouts.",
    "The team offsite is in Porto in the second week of June.",
    "Book club meets on the last Friday of the month.",
]
CASES = [
    ("the bastion that does not go through Teleport", 1),
    ("which flight was not to Amsterdam", 3),
    ("the Airflow version we did not put in prod", 5),
    ("the migration bot commit that had nothing to do with lock timeouts", 7),
]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    config = NodeConfig()
    config.data_dir = tmp_path_factory.mktemp("negation") / "node"
    config.memory.embedder = "minilm"
    memory = Memory(config)
    memory.add_crystals([memory.prepare(text) for text in MEMORIES])
    yield memory
    memory.close()


@pytest.mark.parametrize(("query", "answer"), CASES)
def test_the_memory_the_question_rules_out_is_not_first(memory: Memory, query: str, answer: int) -> None:
    hits = memory.search(SearchRequest(query=query, k=3, record_access=False))
    assert hits[0].crystal.text == MEMORIES[answer], [hit.crystal.text[:40] for hit in hits]


def test_a_question_asking_why_keeps_its_words(memory: Memory) -> None:
    hits = memory.search(SearchRequest(query="why was Airflow 2.10.0 not put in prod", k=3, record_access=False))
    assert hits[0].crystal.text == MEMORIES[5]


def test_a_crafted_question_full_of_negations_is_answered(memory: Memory) -> None:
    query = ("the bastion that is " + "not Teleport, " * 400)[:4000]
    hits = memory.search(SearchRequest(query=query, k=3, record_access=False))
    assert len(hits) == 3
