"""Packed batches (texts batched by token count: less padding) give each text its own vector, in input order (real MiniLM)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from node.memory.embedding.embedder import MiniLMEmbedder
from tests.fixtures.window_texts import GARDEN, SECRET

# Character length and token count disagree on purpose: a long run of one letter is few tokens,
# spaced single letters are one token each.
TEXTS = [
    "(1:56 pm on 8 May, 2023) Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "x" * 60,
    GARDEN + SECRET,  # longer than one window
    "ok",
    "a b c d e f g h i j k l m n o p",
    "Deploys wait for Monday.",
    SECRET + GARDEN,
    "The ledger database's password is swapped out automatically each quarter.",
    "y" * 40 + " " + "z" * 40,
    "Melanie: Sounds great! What did you paint?",
    "1 2 3 4 5 6 7 8 9 10 11 12",
]


@pytest.fixture(scope="module")
def fp32(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEmbedder:
    # fp32: no per-batch activation quantisation, so batching may not change a vector at all.
    return MiniLMEmbedder("fp32", cache_dir=tmp_path_factory.mktemp("models"),
                          packed_batch_size=3)


def test_packed_batches_give_each_text_its_own_vector_in_input_order(fp32: MiniLMEmbedder) -> None:
    vectors, windows = fp32.embed_windows(TEXTS, packed=True)
    alone = [fp32.embed_windows([text]) for text in TEXTS]
    assert float(np.abs(vectors - np.vstack([vector for vector, _ in alone])).max()) < 1e-5
    assert float(np.abs(vectors - fp32.embed(TEXTS)).max()) < 1e-5  # the default batching's vectors
    for row, (_, (own,)) in enumerate(alone):
        if own is None:
            assert windows[row] is None
        else:
            assert windows[row] is not None and float(np.abs(windows[row] - own).max()) < 1e-5
    assert [row for row, split in enumerate(windows) if split is not None] == [2, 6]


def test_packed_batches_hold_texts_of_neighbouring_token_counts(fp32: MiniLMEmbedder,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    counts: list[list[int]] = []
    run = fp32._run

    def recording(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        counts.append(attention_mask.sum(axis=1).tolist())
        return run(input_ids, attention_mask)

    monkeypatch.setattr(fp32, "_run", recording)
    fp32.embed_windows(TEXTS, packed=True)
    short = [batch for batch in counts if max(batch) < fp32.max_tokens]  # the long texts' windows apart
    assert sum(len(batch) for batch in short) == len(TEXTS) - 2
    for before, after in itertools.pairwise(short):
        assert max(before) <= min(after), counts
