"""Long texts are embedded window by window, not cut at the model's 256 tokens (real MiniLM)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from node.config import NodeConfig
from node.memory.embedding.embedder import MAX_WINDOWS, MiniLMEmbedder
from node.memory.facade import Memory, SearchRequest
from tests.fixtures.window_texts import GARDEN, QUESTION, SECRET


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def windows(cache_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(cache_dir=cache_dir)


@pytest.fixture(scope="module")
def truncation(cache_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(cache_dir=cache_dir, max_windows=1)


def test_the_tail_of_a_long_text_counts(windows: MiniLMEmbedder, truncation: MiniLMEmbedder) -> None:
    long_text = GARDEN + SECRET
    assert len(windows.tokenize([long_text])[0][0]) == windows.max_tokens  # it does not fit one window
    question = windows.embed([QUESTION])[0]
    seen = float(question @ windows.embed([long_text])[0])
    cut = float(question @ truncation.embed([long_text])[0])
    assert seen > cut + 0.1, (seen, cut)


def test_short_texts_and_order_are_unchanged(cache_dir: Path, windows: MiniLMEmbedder,
                                             truncation: MiniLMEmbedder) -> None:
    short = ["ERR-4412 means the OAuth refresh token expired.", "ok", "Deploys wait for Monday."]
    np.testing.assert_array_equal(windows.embed(short), truncation.embed(short))
    # A mix keeps input order, each row its own text's vector (fp32: no per-batch quantisation).
    fp32 = MiniLMEmbedder("fp32", cache_dir=cache_dir)
    texts = [GARDEN + SECRET, short[0], SECRET + GARDEN, short[1]]
    together = fp32.embed(texts)
    alone = np.vstack([fp32.embed([text]) for text in texts])
    assert (together * alone).sum(axis=1).min() > 0.99999
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_a_crafted_huge_text_costs_a_bounded_number_of_windows(windows: MiniLMEmbedder) -> None:
    huge = "a " * 32_768  # 64 KiB, the most a memory may hold: ~32k tokens
    assert len(windows._windows([huge])[0]) == MAX_WINDOWS
    vector = windows.embed([huge])
    assert vector.shape == (1, 384) and np.isfinite(vector).all()
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    with pytest.raises(ValueError):
        MiniLMEmbedder(max_windows=0)


def _rank_of_long_memory(data_dir: Path, embedder: MiniLMEmbedder) -> int:
    config = NodeConfig()
    config.data_dir = data_dir
    memory = Memory(config, embedder=embedder)
    try:
        distractors = [
            "The team offsite is in Porto in the second week of June.",
            "Grafana dashboards for the checkout flow live in the payments folder.",
            "My dentist appointment moved to Thursday at nine.",
            "The bike shop replaced the rear brake pads for forty euros.",
            "Book club meets on the last Friday of the month at Rita's place.",
        ]
        added = memory.add_crystals([memory.prepare(text) for text in [GARDEN + SECRET, *distractors]])
        hits = memory.search(SearchRequest(query=QUESTION, k=6, record_access=False))
        return [hit.crystal.id for hit in hits].index(added[0].id) + 1
    finally:
        memory.close()


def test_search_finds_a_memory_by_what_its_end_says(tmp_path: Path, windows: MiniLMEmbedder,
                                                      truncation: MiniLMEmbedder) -> None:
    """Through Memory.search: cut at 256 tokens the long memory is only about the garden and
    ranks near the bottom of six; read whole it comes up among the first three (MiniLM puts a
    couple of unrelated short notes near a 60/40 blend of two topics)."""
    seen = _rank_of_long_memory(tmp_path / "windows", windows)
    cut = _rank_of_long_memory(tmp_path / "truncation", truncation)
    assert seen <= 3 and cut >= seen + 2, (seen, cut)
