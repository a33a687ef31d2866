"""The second opinion's pure parts (node.memory.search.second_opinion): which encoder, the re-scoring,
and the crafted rows its table may hold on a real SQLite store."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from node.config import ConfigError
from node.crystals.model import Crystal
from node.crystals.rows import vector_bytes
from node.crystals.store import CrystalStore
from node.db import Database
from node.memory.embedding.embedder_l3 import ONNX_FILE, ModelFileChanged, checked_digest
from node.memory.search.second_opinion import (
    SECOND_OPINION_WEIGHT,
    missing_count,
    read_vectors,
    rescore,
    second_name,
)

ENCODER = "paraphrase-MiniLM-L3-v2-onnx-int8"
DIM = 4


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_auto_pairs_each_model_with_the_other_and_none_turns_it_off() -> None:
    assert second_name("auto", "all-MiniLM-L6-v2-onnx-int8") == "l3"
    assert second_name("auto", "all-MiniLM-L6-v2-onnx-fp32") == "l3"
    assert second_name("auto", "all-mpnet-base-v2-onnx-int8") == "minilm"
    assert second_name("auto", "hashing-384") is None  # the tests' embedder has none
    assert second_name("none", "all-MiniLM-L6-v2-onnx-int8") is None
    assert second_name("l3", "all-mpnet-base-v2-onnx-int8") == "l3"
    with pytest.raises(ConfigError, match="second_opinion"):
        second_name("bge", "all-MiniLM-L6-v2-onnx-int8")


def test_rescore_adds_the_weighted_second_cosine_and_reorders() -> None:
    query = unit(1, 0, 0, 0)
    # The index puts 1 first; the second encoder disagrees strongly enough to swap them.
    dense = [(1, 0.80), (2, 0.78), (3, 0.50)]
    vectors = {1: unit(0, 1, 0, 0), 2: unit(1, 0, 0, 0), 3: unit(1, 1, 0, 0)}
    scored = rescore(dense, vectors, query)
    assert [rowid for rowid, _ in scored] == [2, 1, 3]
    expected = {1: 0.80, 2: 0.78 + SECOND_OPINION_WEIGHT, 3: 0.50 + SECOND_OPINION_WEIGHT * float(unit(1, 1, 0, 0)[0])}
    for rowid, score in scored:
        assert score == pytest.approx(expected[rowid], abs=1e-6)


def test_rescore_is_never_partial() -> None:
    """One candidate without a second vector: the list stays the index's, scores untouched."""
    dense = [(1, 0.80), (2, 0.78)]
    assert rescore(dense, {2: unit(1, 0, 0, 0)}, unit(1, 0, 0, 0)) == dense
    assert rescore([], {}, unit(1, 0, 0, 0)) == []


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "crystals.db")
    CrystalStore(database)  # migrations: crystal_second exists
    return database


def _crystal_rows(db: Database, count: int) -> list[int]:
    store = CrystalStore(db)
    crystals = [Crystal(text=f"memory {i}", embedding=[1.0, 0.0, 0.0, 0.0]) for i in range(count)]
    return [result.rowid for result in store.add_many(crystals)]


def test_crafted_rows_are_ignored_and_logged(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    rowids = _crystal_rows(db, 8)
    good = unit(1, 2, 3, 4)
    rows = [
        (rowids[0], ENCODER, vector_bytes(good)),  # the one valid row
        (rowids[1], "another-encoder", vector_bytes(good)),  # another model's vector
        (rowids[2], ENCODER, vector_bytes(np.append(good, 0.0))),  # five dimensions
        (rowids[3], ENCODER, vector_bytes(good)[:-1]),  # not whole floats
        (rowids[4], ENCODER, vector_bytes(np.array([np.nan, 0, 0, 1], dtype=np.float32))),
        (rowids[5], ENCODER, vector_bytes(np.array([2, 0, 0, 0], dtype=np.float32))),  # not unit length
        (rowids[6], ENCODER, "not a blob"),
        (rowids[7], ENCODER, vector_bytes(np.zeros(10_000, dtype=np.float32))),  # never read whole
    ]
    with db.transaction() as conn:
        conn.executemany("INSERT INTO crystal_second(crystal_rowid, encoder, vector) VALUES (?, ?, ?)", rows)
    with caplog.at_level(logging.WARNING, logger="node.memory.search.second_opinion"):
        found = read_vectors(db, rowids, ENCODER, DIM)
    assert list(found) == [rowids[0]]
    np.testing.assert_array_equal(found[rowids[0]], good)
    assert sum("second_opinion_vector_ignored" in record.getMessage() for record in caplog.records) == 7
    # Every crystal but the valid one lacks a usable vector of this encoder... as counted at start
    # the rows of the right encoder count as present (their content is checked when read).
    assert missing_count(db, ENCODER) == 1
    assert missing_count(db, "never-stored") == 8


def test_second_vectors_go_with_their_crystal(db: Database) -> None:
    store = CrystalStore(db)
    crystal = Crystal(text="the lease ends in March", embedding=[1.0, 0.0, 0.0, 0.0])
    crystal.second_embedding = (ENCODER, unit(0, 1, 0, 0).tolist())
    [result] = store.add_many([crystal])
    assert list(read_vectors(db, [result.rowid], ENCODER, DIM)) == [result.rowid]
    with db.transaction() as conn:
        conn.execute("DELETE FROM crystals WHERE rowid=?", (result.rowid,))
    assert db.one("SELECT COUNT(*) AS n FROM crystal_second")["n"] == 0  # type: ignore[index]


def test_a_changed_l3_graph_is_refused(tmp_path: Path) -> None:
    (tmp_path / Path(ONNX_FILE).name).write_bytes(b"not the pinned graph")
    with pytest.raises(ModelFileChanged, match="pinned"):
        checked_digest(tmp_path)
