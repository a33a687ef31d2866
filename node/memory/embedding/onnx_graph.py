"""A small writer for ONNX graphs built from safetensors weights (shared by the MiniLM and MPNet builders)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class EncoderShape(Protocol):
    @property
    def hidden(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def layers(self) -> int: ...
    @property
    def layer_norm_eps(self) -> float: ...
    @property
    def head_dim(self) -> int: ...


@dataclass(frozen=True)
class AttentionNames:
    """Where a transformer family keeps each layer's attention weights (below ``encoder.layer.N.``)."""

    query: str
    key: str
    value: str
    output: str
    norm: str


BERT_ATTENTION = AttentionNames("attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "attention.output.LayerNorm")
MPNET_ATTENTION = AttentionNames("attention.attn.q", "attention.attn.k", "attention.attn.v",
                                 "attention.attn.o", "attention.LayerNorm")


class GraphWriter:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def ints(self, name: str, values: Any) -> str:
        """An int64 constant."""
        return self.constant(name, np.array(values, np.int64))

    def floats(self, name: str, value: Any) -> str:
        """A float32 constant."""
        return self.constant(name, np.array(value, np.float32))

    def padding_mask(self) -> tuple[str, str]:
        """``attention_mask`` as float, and the additive mask ``[batch, 1, 1, seq]`` made from it:
        0 for tokens, -10000 for padding (as BERT)."""
        mask_float = self.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
        mask_bias = self.op(
            "Mul", [self.op("Sub", [self.floats("mask_one", 1.0), mask_float]), self.floats("mask_neg", -10000.0)]
        )
        return mask_float, self.op("Unsqueeze", [mask_bias, self.ints("axes_one_two", [1, 2])])

    def op(self, op_type: str, inputs: list[str], **attributes: Any) -> str:
        self._counter += 1
        output = f"{op_type.lower()}_{self._counter}"
        self.nodes.append(
            helper.make_node(op_type, inputs, [output], name=f"{op_type}_{self._counter}", **attributes)
        )
        return output

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        # PyTorch stores Linear weights as (out, in); MatMul wants (in, out).
        weight = self.constant(f"{prefix}.weight_t", np.ascontiguousarray(weights[f"{prefix}.weight"].T))
        bias = self.constant(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("Add", [self.op("MatMul", [x, weight]), bias])

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
        scale = self.constant(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = self.constant(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    def gelu(self, x: str) -> str:
        # Exact (erf) GELU as in BERT, written as x * 0.5 * (1 + erf(x / sqrt 2)):
        # the shape onnxruntime's GeluFusion recognises (it becomes one BiasGelu).
        sqrt2 = self.constant(f"gelu_sqrt2_{self._counter}", np.array(math.sqrt(2), np.float32))
        one = self.constant(f"gelu_one_{self._counter}", np.array(1.0, np.float32))
        half = self.constant(f"gelu_half_{self._counter}", np.array(0.5, np.float32))
        erf = self.op("Erf", [self.op("Div", [x, sqrt2])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [erf, one])]), half])


def encoder_layers(g: GraphWriter, weights: dict[str, np.ndarray], hidden: str, score_bias: str,
                   shape: EncoderShape, names: AttentionNames) -> str:
    """``shape.layers`` post-norm transformer layers (BERT and MPNet alike); ``score_bias`` is added
    to every layer's attention scores (the padding mask, and for MPNet its relative-position bias)."""
    split_heads = g.constant("split_heads_shape", np.array([0, 0, shape.heads, shape.head_dim], np.int64))
    merge_heads = g.constant("merge_heads_shape", np.array([0, 0, shape.hidden], np.int64))
    scale = g.constant("attention_scale", np.array(1.0 / math.sqrt(shape.head_dim), np.float32))
    for index in range(shape.layers):
        prefix = f"encoder.layer.{index}"

        def heads(projection: str, perm: list[int], prefix: str = prefix, source: str = hidden) -> str:
            projected = g.linear(source, weights, f"{prefix}.{projection}")
            return g.op("Transpose", [g.op("Reshape", [projected, split_heads])], perm=perm)

        query = heads(names.query, [0, 2, 1, 3])
        key = heads(names.key, [0, 2, 3, 1])
        value = heads(names.value, [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [query, key]), scale]), score_bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), value])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.linear(context, weights, f"{prefix}.{names.output}")
        hidden = g.layer_norm(g.op("Add", [attended, hidden]), weights, f"{prefix}.{names.norm}",
                              shape.layer_norm_eps)
        inner = g.gelu(g.linear(hidden, weights, f"{prefix}.intermediate.dense"))
        output = g.linear(inner, weights, f"{prefix}.output.dense")
        hidden = g.layer_norm(g.op("Add", [output, hidden]), weights, f"{prefix}.output.LayerNorm",
                              shape.layer_norm_eps)
    return hidden


def mean_pool_normalised(g: GraphWriter, hidden: str, mask_float: str) -> None:
    """Mean pooling over real tokens, then L2 normalisation (sentence-transformers modules 1 and 2),
    written to the graph output ``sentence_embedding``."""
    token_mask = g.op("Unsqueeze", [mask_float, g.constant("axes_last", np.array([2], np.int64))])
    summed = g.op("ReduceSum", [g.op("Mul", [hidden, token_mask]), g.constant("axes_seq", np.array([1], np.int64))],
                  keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask_float, g.constant("axes_seq_counts", np.array([1], np.int64))],
                               keepdims=1),
                          g.constant("count_floor", np.array(1e-9, np.float32))])
    pooled = g.op("Div", [summed, counts])
    norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1),
                        g.constant("norm_floor", np.array(1e-12, np.float32))])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["sentence_embedding"], name="L2Normalize"))


def sentence_model(g: GraphWriter, name: str, hidden_size: int, opset: int) -> onnx.ModelProto:
    """The checked model of ``g``: ``input_ids`` and ``attention_mask`` in, ``sentence_embedding`` out."""
    graph = helper.make_graph(
        g.nodes,
        name,
        inputs=[
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        outputs=[helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden_size])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="crystalmesh")
    model.ir_version = 8
    onnx.checker.check_model(model)
    # Typed intermediate shapes let onnxruntime fuse residual + LayerNorm
    # (SkipLayerNormalization) and let the quantiser type every MatMul.
    return onnx.shape_inference.infer_shapes(model)
