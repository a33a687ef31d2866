"""A plain-numpy forward pass of MiniLM, the yardstick for the ONNX graph.

Written independently of :mod:`node.memory.embedder_onnx` (straight from the
BERT paper's layer order), so a test can check that the built graph computes
the same function as the published weights. Slow; never used for serving.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from node.memory.embedder_onnx import BertShape

Array = NDArray[np.float64]


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def _gelu(x: Array) -> Array:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference_embed(
    weights: dict[str, np.ndarray], shape: BertShape, input_ids: np.ndarray, attention_mask: np.ndarray
) -> NDArray[np.float32]:
    """Mean-pooled, L2-normalised sentence embeddings computed in float64."""
    w = {name: value.astype(np.float64) for name, value in weights.items() if value.dtype != np.int64}

    def linear(x: Array, prefix: str) -> Array:
        return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]

    batch, sequence = input_ids.shape
    hidden = (
        w["embeddings.word_embeddings.weight"][input_ids]
        + w["embeddings.position_embeddings.weight"][:sequence][None]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    eps = shape.layer_norm_eps
    hidden = _layer_norm(hidden, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    mask = attention_mask.astype(np.float64)
    bias = (1.0 - mask)[:, None, None, :] * -10000.0
    for index in range(shape.layers):
        prefix = f"encoder.layer.{index}"

        def split(x: Array) -> Array:
            return x.reshape(batch, sequence, shape.heads, shape.head_dim).transpose(0, 2, 1, 3)

        query = split(linear(hidden, f"{prefix}.attention.self.query"))
        key = split(linear(hidden, f"{prefix}.attention.self.key"))
        value = split(linear(hidden, f"{prefix}.attention.self.value"))
        scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(shape.head_dim) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = scores / scores.sum(axis=-1, keepdims=True)
        context = (probabilities @ value).transpose(0, 2, 1, 3).reshape(batch, sequence, shape.hidden)
        attended = linear(context, f"{prefix}.attention.output.dense")
        hidden = _layer_norm(
            attended + hidden,
            w[f"{prefix}.attention.output.LayerNorm.weight"],
            w[f"{prefix}.attention.output.LayerNorm.bias"],
            eps,
        )
        inner = _gelu(linear(hidden, f"{prefix}.intermediate.dense"))
        hidden = _layer_norm(
            linear(inner, f"{prefix}.output.dense") + hidden,
            w[f"{prefix}.output.LayerNorm.weight"],
            w[f"{prefix}.output.LayerNorm.bias"],
            eps,
        )
    pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)
