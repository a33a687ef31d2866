"""A plain-numpy forward pass of MiniLM, the yardstick for the ONNX graph.

Written independently of :mod:`node.memory.embedding.embedder_onnx` (straight from the
BERT paper's layer order), so a test can check that the built graph computes
the same function as the published weights. Slow; never used for serving.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from node.memory.embedding.embedder_mpnet import MPNetShape
from node.memory.embedding.embedder_onnx import BertShape

Array = NDArray[np.float64]


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def _gelu(x: Array) -> Array:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _linear(w: dict[str, Array], x: Array, prefix: str) -> Array:
    return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]


# Where each family keeps a layer's attention weights: query, key, value, output, LayerNorm.
_BERT_ATTENTION = ("attention.self.query", "attention.self.key", "attention.self.value",
                   "attention.output.dense", "attention.output.LayerNorm")
_MPNET_ATTENTION = ("attention.attn.q", "attention.attn.k", "attention.attn.v",
                    "attention.attn.o", "attention.LayerNorm")


def _encode_and_pool(
    w: dict[str, Array], hidden: Array, bias: Array, mask: Array, shape: BertShape,
    attention: tuple[str, str, str, str, str],
) -> NDArray[np.float32]:
    """Post-LayerNorm transformer layers (``bias`` added to every layer's attention scores),
    then mean pooling over real tokens and L2 normalisation."""
    batch, sequence = hidden.shape[:2]
    query_name, key_name, value_name, output_name, norm_name = attention
    eps = shape.layer_norm_eps
    for index in range(shape.layers):
        prefix = f"encoder.layer.{index}"

        def split(x: Array) -> Array:
            return x.reshape(batch, sequence, shape.heads, shape.head_dim).transpose(0, 2, 1, 3)

        query = split(_linear(w, hidden, f"{prefix}.{query_name}"))
        key = split(_linear(w, hidden, f"{prefix}.{key_name}"))
        value = split(_linear(w, hidden, f"{prefix}.{value_name}"))
        scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(shape.head_dim) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = scores / scores.sum(axis=-1, keepdims=True)
        context = (probabilities @ value).transpose(0, 2, 1, 3).reshape(batch, sequence, shape.hidden)
        hidden = _layer_norm(
            _linear(w, context, f"{prefix}.{output_name}") + hidden,
            w[f"{prefix}.{norm_name}.weight"],
            w[f"{prefix}.{norm_name}.bias"],
            eps,
        )
        inner = _gelu(_linear(w, hidden, f"{prefix}.intermediate.dense"))
        hidden = _layer_norm(
            _linear(w, inner, f"{prefix}.output.dense") + hidden,
            w[f"{prefix}.output.LayerNorm.weight"],
            w[f"{prefix}.output.LayerNorm.bias"],
            eps,
        )
    pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)


def reference_embed(
    weights: dict[str, np.ndarray], shape: BertShape, input_ids: np.ndarray, attention_mask: np.ndarray
) -> NDArray[np.float32]:
    """Mean-pooled, L2-normalised sentence embeddings computed in float64."""
    w = {name: value.astype(np.float64) for name, value in weights.items() if value.dtype != np.int64}
    sequence = input_ids.shape[1]
    hidden = (
        w["embeddings.word_embeddings.weight"][input_ids]
        + w["embeddings.position_embeddings.weight"][:sequence][None]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    hidden = _layer_norm(hidden, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                         shape.layer_norm_eps)
    mask = attention_mask.astype(np.float64)
    bias = (1.0 - mask)[:, None, None, :] * -10000.0
    return _encode_and_pool(w, hidden, bias, mask, shape, _BERT_ATTENTION)


def _bucket(relative: int, num_buckets: int, max_distance: int) -> int:
    # Written per scalar from MPNetEncoder.relative_position_bucket (T5's scheme).
    n = -relative
    half = num_buckets // 2
    bucket = half if n < 0 else 0
    n = abs(n)
    exact = half // 2
    if n < exact:
        return bucket + n
    large = exact + int(
        np.float32(math.log(np.float32(n) / np.float32(exact))) / np.float32(math.log(max_distance / exact))
        * np.float32(half - exact)
    )
    return bucket + min(large, half - 1)


def reference_embed_mpnet(
    weights: dict[str, np.ndarray], shape: MPNetShape, input_ids: np.ndarray, attention_mask: np.ndarray
) -> NDArray[np.float32]:
    """all-mpnet-base-v2 in float64: RoBERTa-style positions, one relative-position bias
    added in every layer, BERT's post-LayerNorm blocks, mean pooling, L2 norm."""
    w = {name: value.astype(np.float64) for name, value in weights.items() if value.dtype != np.int64}
    sequence = input_ids.shape[1]
    real = (input_ids != 1).astype(np.int64)
    positions = np.cumsum(real, axis=1) * real + 1
    eps = shape.layer_norm_eps
    hidden = w["embeddings.word_embeddings.weight"][input_ids] + w["embeddings.position_embeddings.weight"][positions]
    hidden = _layer_norm(hidden, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    table = w["encoder.relative_attention_bias.weight"]  # [buckets, heads]
    position_bias = np.zeros((shape.heads, sequence, sequence))
    for i in range(sequence):
        for j in range(sequence):
            position_bias[:, i, j] = table[_bucket(j - i, shape.buckets, 128)]
    mask = attention_mask.astype(np.float64)
    bias = position_bias[None] + (1.0 - mask)[:, None, None, :] * -10000.0
    return _encode_and_pool(w, hidden, bias, mask, shape, _MPNET_ATTENTION)
