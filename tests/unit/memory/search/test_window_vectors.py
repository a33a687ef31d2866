"""A long memory scores by its best window (node.memory.search.windows), on a real store with MiniLM."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from node.config import NodeConfig
from node.crystals import schema
from node.crystals.model import Crystal
from node.memory import versions
from node.memory.embedding.embedder import MAX_WINDOWS, MiniLMEmbedder
from node.memory.facade import Memory, SearchRequest
from node.memory.search.windows import read_windows, rescore
from tests.fixtures.crystal_store import store_at_version
from tests.fixtures.window_texts import GARDEN, QUESTION, SECRET

# The secret's ~120 tokens open the memory, ~600 tokens of garden follow, and a note about
# the car's tyres closes it: four windows. QUESTION asks about the head, TYRES about the tail.
TAIL = (
    "The winter tyres for the car are stored at the garage on Elm Street. They swap them in late "
    "October and back in April, thirty euros each time, and check the tread depth while at it."
)
LONG = SECRET + " " + GARDEN * 2 + TAIL
TYRES = "Where are my snow tires kept over the summer?"
DISTRACTORS = [
    "The payroll export for the accountant is due on the fifth of each month.",
    "The team offsite is in Porto in the second week of June.",
    "The bike shop replaced the rear brake pads for forty euros.",
    "Grafana dashboards for the checkout flow live in the payments folder.",
    "My dentist appointment moved to Thursday at nine.",
    "Book club meets on the last Friday of the month at Rita's place.",
]


@pytest.fixture(scope="module")
def whole() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _memory(data_dir: Path, embedder: MiniLMEmbedder) -> Memory:
    config = NodeConfig()
    config.data_dir = data_dir
    return Memory(config, embedder=embedder)


def _ranks(memory: Memory, keep_windows: bool) -> list[int]:
    """Rank (1-based) of the long memory for QUESTION and for TYRES."""
    crystals = [memory.prepare(text) for text in [LONG, *DISTRACTORS]]
    if keep_windows:
        results = memory.add_crystals(crystals)
    else:  # as before window vectors were kept: the mean alone
        results = memory.add_crystals(crystals, memory.embed([crystal.text for crystal in crystals]))
    ranks = []
    for question in (QUESTION, TYRES):
        hits = memory.search(SearchRequest(query=question, k=7, record_access=False))
        ranks.append([hit.crystal.id for hit in hits].index(results[0].id) + 1)
    return ranks


def test_a_long_memory_ranks_by_its_best_window(tmp_path: Path, whole: MiniLMEmbedder) -> None:
    """Truncated, the memory is the secret's: first for QUESTION, not found for TYRES. Its windows'
    mean blurs the secret (4th for QUESTION); scored by its best window it is first for both."""
    memory = _memory(tmp_path / "best", whole)
    try:
        assert len(whole._windows([LONG])[0]) == 4
        best = _ranks(memory, keep_windows=True)
        assert memory.db.one("SELECT COUNT(*) FROM crystal_windows")[0] == 1  # the long one only
    finally:
        memory.close()
    memory = _memory(tmp_path / "mean", whole)
    try:
        mean = _ranks(memory, keep_windows=False)
    finally:
        memory.close()
    memory = _memory(tmp_path / "truncation", MiniLMEmbedder(max_windows=1))
    try:
        cut = _ranks(memory, keep_windows=True)
    finally:
        memory.close()
    assert best == [1, 1], (best, mean, cut)
    assert cut[0] == 1 and mean[0] >= 3 and cut[1] >= 3, (best, mean, cut)


def _crafted(dim: int, query: np.ndarray) -> dict[str, tuple[str, object]]:
    """Window rows a hostile local user could write, each aimed at winning the query."""
    aimed = np.vstack([query, query]).astype(np.float32)
    nan = aimed.copy()
    nan[1, 3] = np.nan
    return {
        "wrong length": ("EMB", aimed.tobytes()[:-4]),
        "one window": ("EMB", aimed[:1].tobytes()),
        "nan": ("EMB", nan.tobytes()),
        "not unit length": ("EMB", (aimed * 1000).tobytes()),
        "too many windows": ("EMB", np.vstack([query] * (MAX_WINDOWS + 1)).astype(np.float32).tobytes()),
        "huge": ("EMB", b"\x00" * (8 << 20)),
        "text, not a blob": ("EMB", "0.5 " * dim),
        "another embedder": ("hashing-384", aimed.tobytes()),
        # Two unit 768-d vectors: as long as four 384-d ones, none of them unit length.
        "another dimension": ("EMB", (np.ones((2, 768), dtype=np.float32) / np.sqrt(768)).tobytes()),
    }


def test_crafted_window_rows_are_ignored(tmp_path: Path, whole: MiniLMEmbedder,
                                         caplog: pytest.LogCaptureFixture) -> None:
    memory = _memory(tmp_path / "node", whole)
    try:
        query = whole.embed([QUESTION])[0]
        rows = _crafted(whole.dim, query)
        fillers = [f"Filler note {n}: the recycling goes out on Tuesdays." for n in range(len(rows) - 6)]
        results = memory.add_crystals([memory.prepare(text) for text in [LONG, *DISTRACTORS, *fillers]])
        request = SearchRequest(query=QUESTION, k=7, record_access=False)
        before = [(hit.crystal.id, hit.dense) for hit in memory.search(request)]
        name = memory.embedder.name
        targets = [result.rowid for result in results[1:]]  # short memories: no windows of their own
        with memory.db.transaction() as conn:
            for rowid, (embedder, blob) in zip(targets, rows.values(), strict=True):
                conn.execute("INSERT INTO crystal_windows(crystal_rowid, embedder, vectors) VALUES (?, ?, ?)",
                             (rowid, embedder.replace("EMB", name), blob))
        assert memory.db.one("SELECT COUNT(*) FROM crystal_windows")[0] == len(targets) + 1
        with caplog.at_level(logging.WARNING, logger="node.memory.search.windows"):
            after = [(hit.crystal.id, hit.dense) for hit in memory.search(request)]
        # Had any crafted row counted, its memory would score ~1 (or 1000) and come first.
        assert after[0] == before[0] and max(dense or 0.0 for _, dense in after) < 0.5, (before, after)
        assert read_windows(memory.db, targets, name, whole.dim) == {}
        assert caplog.text.count("window_vectors_ignored") >= len(targets)
    finally:
        memory.close()


def test_windows_are_written_with_their_crystal_or_not_at_all(tmp_path: Path, whole: MiniLMEmbedder) -> None:
    memory = _memory(tmp_path / "node", whole)
    try:
        # The window insert fails (as a full disk or a kill would stop it): the crystal must not stay.
        memory.db.execute("CREATE TRIGGER fail BEFORE INSERT ON crystal_windows "
                          "BEGIN SELECT RAISE(ABORT, 'no room'); END")
        with pytest.raises(sqlite3.DatabaseError):
            memory.add(LONG)
        assert memory.db.one("SELECT COUNT(*) FROM crystals")[0] == 0
        assert memory.index.count == 0
        memory.db.execute("DROP TRIGGER fail")
        first = memory.add(LONG)
        rowid = memory.db.one("SELECT rowid FROM crystals WHERE id=?", (first.id,))[0]
        [row] = memory.db.all("SELECT crystal_rowid, embedder, length(vectors) FROM crystal_windows")
        assert tuple(row) == (rowid, whole.name, 4 * whole.dim * 4)
        short = memory.add("A short note fits one window.")
        assert memory.db.one("SELECT COUNT(*) FROM crystal_windows")[0] == 1
        # A new version of a long memory gets its own windows; the old one keeps its own.
        updated = versions.update(memory, first.id, text=LONG + " The garage closes at noon on Saturdays.")
        new_rowid = memory.db.one("SELECT rowid FROM crystals WHERE id=?", (updated.id,))[0]
        assert read_windows(memory.db, [rowid, new_rowid], whole.name, whole.dim).keys() == {rowid, new_rowid}
        # Deleted and purged: its window vectors go with its rows.
        versions.delete(memory, first.id)
        assert memory.purge(()) == 2
        assert memory.db.one("SELECT COUNT(*) FROM crystal_windows")[0] == 0
        assert memory.store.get(short.id)
    finally:
        memory.close()


def test_a_store_made_before_window_vectors_is_migrated(tmp_path: Path, whole: MiniLMEmbedder) -> None:
    data_dir = tmp_path / "node"
    old = Crystal(text=DISTRACTORS[0], embedding=whole.embed([DISTRACTORS[0]])[0].tolist())
    store_at_version(data_dir, 3, [old])  # as schema version 3 left it, with one stored memory
    memory = _memory(data_dir, whole)
    try:
        assert memory.db.schema_version(schema.CONCEPT) == schema.SCHEMA_VERSION == 5
        hits = memory.search(SearchRequest(query="When is the payroll export due?", k=3, record_access=False))
        assert hits[0].crystal.id == old.id
        memory.add(LONG)
        assert memory.db.one("SELECT COUNT(*) FROM crystal_windows")[0] == 1
        hits = memory.search(SearchRequest(query=TYRES, k=3, record_access=False))
        assert hits[0].crystal.text == LONG
    finally:
        memory.close()


def test_rescore_by_hand() -> None:
    """Query e0. Rowid 2's windows reach 0.9 (its mean 0.3); rowid 3, found only by full-text
    search, reaches 0.4 and joins above the dense floor 0.3; rowid 4's 0.2 stays out; rowid 1
    (no windows) keeps its 0.5."""
    query = np.eye(3, dtype=np.float32)[0]
    unit = np.array([[0.9, np.sqrt(1 - 0.81), 0.0], [0.1, 0.0, np.sqrt(0.99)]], dtype=np.float32)
    windows = {2: unit, 3: unit * [[0.4 / 0.9], [1.0]], 4: unit * [[0.2 / 0.9], [1.0]]}
    ranked = rescore([(1, 0.5), (2, 0.3)], [3, 4, 1], windows, query)
    assert [rowid for rowid, _ in ranked] == [2, 1, 3]
    assert [round(score, 6) for _, score in ranked] == [0.9, 0.5, 0.4]
    assert rescore([(1, 0.5), (2, 0.3)], [], {}, query) == [(1, 0.5), (2, 0.3)]
