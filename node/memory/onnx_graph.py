"""A small writer for ONNX graphs built from safetensors weights (shared by the MiniLM and MPNet builders)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


class GraphWriter:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

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
