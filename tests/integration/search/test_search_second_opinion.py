"""The second opinion (node.memory.search.second_opinion) on a real store: MiniLM int8 in the index,
paraphrase-MiniLM-L3 beside it, SQLite and hnswlib as the product runs them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from node.config import ConfigError, load_config
from node.crystals import schema
from node.crystals.model import Crystal, SemanticType
from node.crystals.rows import vector_bytes
from node.memory import versions
from node.memory.embedding.embedder import Embedder, get_embedder
from node.memory.facade import Memory, SearchRequest
from node.memory.learning.testament_io import export_testament, import_testament
from node.memory.reembedding import reembed
from node.memory.search.second_opinion import SECOND_OPINION_WEIGHT, missing_count
from protocol.identity import Identity
from tests.fixtures.crystal_store import store_at_version
from tests.support.cli import Cli, isolate_home

TEXTS = [
    "Booked the movers for the 14th: three men and a van, 640 euros, they pack the kitchen too.",
    "The landlord keeps the deposit until the inspection on the 20th.",
    "Renewed the car insurance with the same company, 12 % more than last year.",
    "Dentist says the wisdom tooth can stay unless it starts to hurt again.",
    "The kids' swimming lessons moved to Saturday mornings at the new pool.",
    "Mum's birthday dinner is at the Thai place on Friday, table for six.",
]
QUESTION = "who is transporting my furniture to the new flat"


@pytest.fixture(scope="module")
def l3() -> Embedder:
    return get_embedder("l3")


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder("minilm")


def open_memory(data_dir: Path, second_opinion: str = "auto") -> Memory:
    return Memory(load_config(data_dir, overrides={"memory": {"embedder": "minilm",
                                                              "second_opinion": second_opinion}}, environ={}))


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    opened = open_memory(tmp_path / "node")
    opened.add_crystals([opened.prepare(text) for text in TEXTS])
    try:
        yield opened
    finally:
        opened.close()


def index_vectors(memory: Memory) -> dict[str, np.ndarray]:
    """Crystal id -> the vector the index holds (the store's embedding column)."""
    rows = memory.db.all("SELECT id, embedding FROM crystals WHERE embedding IS NOT NULL")
    return {row["id"]: np.frombuffer(row["embedding"], dtype=np.float32) for row in rows}


def expected_dense(memory: Memory, minilm: Embedder, l3: Embedder | None) -> dict[str, float]:
    """What the dense side should score for QUESTION, from the stored vectors: the index's cosine,
    plus the weighted second cosine when ``l3`` is given."""
    question = minilm.embed([QUESTION])[0]  # search embeds the question alone, so do we
    scores = {crystal_id: float(vector @ question) for crystal_id, vector in index_vectors(memory).items()}
    if l3 is not None:
        question2 = l3.embed([QUESTION])[0]
        for crystal_id, (_, vector) in stored(memory).items():
            scores[crystal_id] += SECOND_OPINION_WEIGHT * float(vector @ question2)
    return scores


def stored(memory: Memory) -> dict[str, tuple[str, np.ndarray]]:
    """Crystal id -> (encoder, vector) of every second-opinion row."""
    rows = memory.db.all("SELECT c.id, s.encoder, s.vector FROM crystal_second s "
                         "JOIN crystals c ON c.rowid = s.crystal_rowid")
    return {row["id"]: (row["encoder"], np.frombuffer(row["vector"], dtype=np.float32)) for row in rows}


def test_every_write_stores_the_second_vector_with_its_crystal(memory: Memory, l3: Embedder) -> None:
    assert memory.second is not None and memory.second.name == l3.name
    first = memory.search(SearchRequest(query="movers van", k=1, record_access=False))[0].crystal
    updated = versions.update(memory, first.id, text=first.text + " Paid the deposit already.")
    skill = memory.add("Triage a flaky CI job: rerun it three times, then pin the changed dependency",
                       semantic_type=SemanticType.SKILL)
    versioned = memory.new_skill_version(skill.id, skill.text + " Note the seed in the log.")
    rows = stored(memory)
    current = {c.id: c.text for c in memory.store.list_crystals(limit=100)}
    assert updated.id in rows and versioned.id in rows
    for crystal_id, text in current.items():
        encoder, vector = rows[crystal_id]
        assert encoder == l3.name
        # the text's own L3 vector (int8 activations are quantised per batch: not bit-equal)
        assert float(vector @ l3.embed([text])[0]) > 0.98
    assert missing_count(memory.db, l3.name) == 0
    assert memory.status()["second_opinion"] == {"encoder": l3.name, "missing": 0}


def test_facts_and_inherited_knowledge_get_their_second_vector_too(tmp_path: Path, l3: Embedder) -> None:
    """The two writers outside the facade: a fact born in consolidation, a testament's import."""
    t0 = 1_700_000_000_000
    elder = open_memory(tmp_path / "elder")
    file = tmp_path / "elder.testament"
    try:
        for i in range(3):
            elder.add(f"the staging deploy failed on friday, users table migration lock, run {i}",
                      semantic_type=SemanticType.EPISODE, created_at_ms=t0 + i)
        elder.consolidate(now=t0 + 3_600_000)
        facts = [c for c in elder.store.list_crystals(limit=20) if c.semantic_type is SemanticType.FACT]
        assert len(facts) == 1 and facts[0].id in stored(elder)
        assert missing_count(elder.db, l3.name) == 0
        export_testament(elder, elder.learning, Identity.from_seed(bytes(range(32))), file, at_ms=t0 + 3_600_000)
    finally:
        elder.close()
    heir = open_memory(tmp_path / "heir")
    try:
        assert import_testament(heir, heir.learning, file.read_bytes(), at_ms=t0 + 7_200_000)["imported"] == 4
        assert len(stored(heir)) == 4 and missing_count(heir.db, l3.name) == 0
    finally:
        heir.close()


def test_search_scores_the_dense_side_with_both_encoders(memory: Memory, l3: Embedder, minilm: Embedder) -> None:
    hits = memory.search(SearchRequest(query=QUESTION, k=len(TEXTS), record_access=False))
    assert hits[0].crystal.text == TEXTS[0]
    expected = expected_dense(memory, minilm, l3)
    alone = expected_dense(memory, minilm, None)
    for hit in hits:
        assert hit.dense == pytest.approx(expected[hit.crystal.id], abs=1e-5)
        assert hit.dense != pytest.approx(alone[hit.crystal.id], abs=1e-5)


def test_without_it_the_dense_side_is_the_index_alone(tmp_path: Path, minilm: Embedder) -> None:
    memory = open_memory(tmp_path / "node", second_opinion="none")
    try:
        memory.add_crystals([memory.prepare(text) for text in TEXTS])
        assert memory.second is None and stored(memory) == {}
        expected = expected_dense(memory, minilm, None)
        for hit in memory.search(SearchRequest(query=QUESTION, k=len(TEXTS), record_access=False)):
            assert hit.dense == pytest.approx(expected[hit.crystal.id], abs=1e-5)
    finally:
        memory.close()


def dense_scores(memory: Memory) -> dict[str, float | None]:
    return {hit.crystal.id: hit.dense
            for hit in memory.search(SearchRequest(query=QUESTION, k=10, record_access=False))}


def test_a_store_written_without_it_goes_without_until_reembed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, l3: Embedder, minilm: Embedder) -> None:
    data_dir = tmp_path / "node"
    before = open_memory(data_dir, second_opinion="none")
    before.add_crystals([before.prepare(text) for text in TEXTS])
    alone = dense_scores(before)
    before.close()

    with caplog.at_level(logging.WARNING, logger="node.memory.search.second_opinion"):
        partial = open_memory(data_dir)
    try:
        assert any("second_opinion_incomplete" in r.getMessage() and "missing=6" in r.getMessage()
                   for r in caplog.records)
        partial.add("Sold the old sofa to a neighbour for 80 euros before the move.")  # gets its vector
        assert missing_count(partial.db, l3.name) == 6
        # Never a partial opinion: the six old crystals have none, so nobody gets one.
        scores = dense_scores(partial)
        assert scores == pytest.approx({k: v for k, v in expected_dense(partial, minilm, None).items()
                                        if k in scores}, abs=1e-5)
    finally:
        partial.close()

    config = load_config(data_dir, environ={})
    assert reembed(config, "minilm").second_opinion == l3.name
    after = open_memory(data_dir)
    try:
        assert missing_count(after.db, l3.name) == 0
        rescored = dense_scores(after)
        expected = expected_dense(after, minilm, l3)  # the opinion counts now
        assert rescored == pytest.approx({k: v for k, v in expected.items() if k in rescored}, abs=1e-5)
        assert set(alone) <= set(rescored)
    finally:
        after.close()


def test_a_crafted_row_turns_the_opinion_off_and_the_search_still_answers(
        memory: Memory, caplog: pytest.LogCaptureFixture) -> None:
    with_opinion = dense_scores(memory)
    assert memory.second is not None
    with memory.db.transaction() as conn:
        conn.execute("UPDATE crystal_second SET vector=? WHERE crystal_rowid=(SELECT MIN(crystal_rowid) "
                     "FROM crystal_second)", (vector_bytes(np.full(memory.second.dim, np.inf)),))
    with caplog.at_level(logging.WARNING, logger="node.memory.search.second_opinion"):
        crafted = dense_scores(memory)
    assert any("second_opinion_vector_ignored" in r.getMessage() for r in caplog.records)
    assert set(crafted) == set(with_opinion)
    memory.second = None
    assert crafted == pytest.approx(dense_scores(memory))  # the index's cosines alone


def test_a_store_at_schema_4_is_migrated_and_searched_without_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, minilm: Embedder, l3: Embedder) -> None:
    data_dir = tmp_path / "node"
    old = Crystal(text=TEXTS[0], embedding=minilm.embed([TEXTS[0]])[0].tolist())
    store_at_version(data_dir, 4, [old])  # as schema version 4 left it, with one stored memory
    with caplog.at_level(logging.WARNING, logger="node.memory.search.second_opinion"):
        memory = open_memory(data_dir)
    try:
        assert memory.db.schema_version(schema.CONCEPT) == schema.SCHEMA_VERSION == 5
        assert any("second_opinion_incomplete" in r.getMessage() for r in caplog.records)
        assert memory.status()["second_opinion"] == {"encoder": l3.name, "missing": 1}
        [hit] = memory.search(SearchRequest(query=QUESTION, k=1, record_access=False))
        assert hit.crystal.id == old.id
        assert hit.dense == pytest.approx(expected_dense(memory, minilm, None)[old.id], abs=1e-5)
        memory.add(TEXTS[1])
        assert len(stored(memory)) == 1 and missing_count(memory.db, l3.name) == 1
    finally:
        memory.close()


def test_a_bad_setting_is_a_config_error_and_its_own_embedder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="second_opinion"):
        open_memory(tmp_path / "bad", second_opinion="bge")
    with pytest.raises(ConfigError, match="own embedder"):
        open_memory(tmp_path / "own", second_opinion="minilm")


def test_the_cli_says_which_second_opinion_a_store_has_and_what_it_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, l3: Embedder) -> None:
    isolate_home(tmp_path, monkeypatch)
    cli = Cli(capsys, tmp_path / "node")
    assert cli.json("init", "--embedder", "minilm")["created"]
    monkeypatch.setenv("CRYSTALMESH_MEMORY_SECOND_OPINION", "none")  # written without it
    assert cli.run("memory", "add", TEXTS[0])[0] == 0
    monkeypatch.delenv("CRYSTALMESH_MEMORY_SECOND_OPINION")
    code, out, _ = cli.run("memory", "status")
    assert code == 0 and f"second       {l3.name}   1 crystals lack it: run `memory reembed`" in out
    assert cli.json("memory", "reembed", "--embedder", "minilm")["second_opinion"] == l3.name
    assert cli.json("memory", "status")["second_opinion"] == {"encoder": l3.name, "missing": 0}
    code, out, _ = cli.run("memory", "status")
    assert f"second       {l3.name}\n" in out
