"""Embedders: the hashing test double, the registry, and the MiniLM ONNX graph against a numpy reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from node.memory.embedding.embedder import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    get_embedder,
)
from node.memory.embedding.embedder_onnx import build_model, load_weights, read_shape, weights_dir
from node.memory.embedding.embedder_reference import reference_embed

SENTENCES = [
    "The staging Postgres instance listens on port 5433.",
    "How do I restart a stuck Celery worker?",
    "ERR-4412 means the OAuth refresh token has expired.",
    "ok",
]


def test_hashing_embedder_shape_norm_and_determinism() -> None:
    embedder = HashingEmbedder(dim=64)
    vectors = embedder.embed(["alpha beta", "alpha beta", "", "gamma"])
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], vectors[1])
    assert isinstance(embedder, Embedder)
    assert embedder.embed([]).shape == (0, 64)


def test_embed_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        HashingEmbedder().embed("not a list")  # type: ignore[arg-type]


def test_get_embedder_names() -> None:
    assert isinstance(get_embedder("hashing"), HashingEmbedder)
    with pytest.raises(ValueError, match=r"unknown embedder 'bert'.*minilm, minilm-fp32, mpnet, mpnet-fp32, hashing"):
        get_embedder("bert")
    fp32 = get_embedder("minilm-fp32")
    assert fp32.name == "all-MiniLM-L6-v2-onnx-fp32" and fp32.dim == 384




@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def fp32(cache_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder("fp32", cache_dir=cache_dir)


@pytest.fixture(scope="module")
def int8(cache_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder("int8", cache_dir=cache_dir)


def test_onnx_graph_matches_numpy_reference(fp32: MiniLMEmbedder) -> None:
    directory = weights_dir()
    input_ids, attention_mask = fp32.tokenize(SENTENCES)
    expected = reference_embed(load_weights(directory), read_shape(directory / "config.json"), input_ids, attention_mask)
    cosines = (fp32.embed(SENTENCES) * expected).sum(axis=1)
    assert cosines.min() > 0.9999


def test_int8_agrees_with_fp32(fp32: MiniLMEmbedder, int8: MiniLMEmbedder) -> None:
    sentences = SENTENCES[:3]
    assert (fp32.embed(sentences) * int8.embed(sentences)).sum(axis=1).min() > 0.98
    # One- or two-token texts are where per-batch activation quantisation hurts most.
    assert float((fp32.embed(["ok"]) * int8.embed(["ok"])).sum()) > 0.95


def test_output_contract_and_order(fp32: MiniLMEmbedder, int8: MiniLMEmbedder) -> None:
    vectors = int8.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert int8.name == "all-MiniLM-L6-v2-onnx-int8" and int8.dim == 384
    # Padding inside a batch must not change a sentence's vector (exactly so in fp32; int8
    # activation scales are per batch, so there only approximately).
    batched = fp32.embed(SENTENCES)
    one_by_one = np.vstack([fp32.embed([sentence]) for sentence in SENTENCES])
    assert (batched * one_by_one).sum(axis=1).min() > 0.99999
    one_by_one_int8 = np.vstack([int8.embed([sentence]) for sentence in SENTENCES])
    assert (vectors * one_by_one_int8).sum(axis=1).min() > 0.93


def test_paraphrases_score_higher_than_unrelated_pairs(int8: MiniLMEmbedder) -> None:
    pairs = [
        ("The database server ran out of disk space.", "The DB host's disk is full."),
        ("The user prefers short answers.", "Keep replies brief for this person."),
        ("Deploys are not allowed on Fridays.", "We never ship to production on a Friday."),
    ]
    left = int8.embed([first for first, _ in pairs])
    right = int8.embed([second for _, second in pairs])
    similarity = left @ right.T
    for index in range(len(pairs)):
        unrelated = np.delete(similarity[index], index)
        assert similarity[index, index] > unrelated.max() + 0.2


def test_build_is_cached_and_leaves_no_temp_files(cache_dir: Path, int8: MiniLMEmbedder) -> None:
    built = build_model(cache_dir)
    modified = (built.fp32_path.stat().st_mtime_ns, built.int8_path.stat().st_mtime_ns)
    again = build_model(cache_dir)
    assert again == built
    assert (built.fp32_path.stat().st_mtime_ns, built.int8_path.stat().st_mtime_ns) == modified
    assert not list(cache_dir.glob("*.tmp"))
    assert built.int8_path.stat().st_size < built.fp32_path.stat().st_size
