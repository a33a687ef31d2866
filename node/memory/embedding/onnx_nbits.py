"""Block-wise int8 weights for an fp32 ONNX graph (onnxruntime's ``MatMulNBits`` contrib op).

Dynamic int8 (:func:`node.memory.embedding.embedder_onnx._quantise`) quantises each
MatMul's *activations* with one scale per tensor; MPNet's activations have
outliers, so that cost too much accuracy (int8-vs-fp32 cosine min 0.74).
Here every MatMul with a constant ``[K, N]`` weight becomes
``com.microsoft.MatMulNBits`` (bits 8, symmetric): each output column's weights
are cut into blocks of ``block`` rows, each block stored as uint8 ``q`` with its
own float scale, ``w ≈ (q − 128) · scale``, ``scale = max |w| / 127``.
``accuracy_level=4`` lets onnxruntime compute in int8, quantising the
activations per block as well, which keeps the outliers local.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

log = logging.getLogger(__name__)

BITS = 8
ZERO_POINT = 1 << (BITS - 1)  # MatMulNBits' default when no zero_points input is given
ACCURACY_LEVEL = 4  # int8 compute


def quantise_weights(weights: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """``[K, N]`` float weights → (uint8 ``[N, K/block, block]``, float32 scales ``[N · K/block]``)."""
    rows, columns = weights.shape
    padded = -(-rows // block) * block
    by_column = np.zeros((columns, padded), dtype=np.float32)
    by_column[:, :rows] = weights.T
    blocks = by_column.reshape(columns, padded // block, block)
    scale = np.abs(blocks).max(axis=2) / 127.0
    scale[scale == 0] = 1.0  # an all-zero block: q = 128 dequantises to 0 whatever the scale
    levels = np.clip(np.rint(blocks / scale[..., None]), -127, 127).astype(np.int16) + ZERO_POINT
    return levels.astype(np.uint8), scale.astype(np.float32).reshape(-1)


def dequantise(levels: np.ndarray, scales: np.ndarray, rows: int) -> np.ndarray:
    """The ``[K, N]`` weights that :func:`quantise_weights`' output stands for."""
    columns, count, block = levels.shape
    values = (levels.astype(np.float32) - ZERO_POINT) * scales.reshape(columns, count)[..., None]
    return values.reshape(columns, count * block)[:, :rows].T


def quantise_blockwise(fp32_path: Path, out_path: Path, block: int = 32) -> int:
    """Write ``fp32_path`` with every constant-weight MatMul as ``MatMulNBits``; return how many."""
    model = onnx.load(str(fp32_path))
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    nodes: list[onnx.NodeProto] = []
    replaced: set[str] = set()
    for node in graph.node:
        weight = initializers.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if weight is None or len(weight.dims) != 2 or weight.data_type != onnx.TensorProto.FLOAT:
            nodes.append(node)
            continue
        values = numpy_helper.to_array(weight)
        rows, columns = values.shape
        levels, scales = quantise_weights(values, block)
        graph.initializer.append(numpy_helper.from_array(levels, f"{weight.name}_q8"))
        graph.initializer.append(numpy_helper.from_array(scales, f"{weight.name}_scales"))
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], f"{weight.name}_q8", f"{weight.name}_scales"],
                list(node.output),
                name=f"{node.name}_q8",
                domain="com.microsoft",
                K=rows,
                N=columns,
                bits=BITS,
                block_size=block,
                accuracy_level=ACCURACY_LEVEL,
            )
        )
        if uses.get(weight.name) == 1:
            replaced.add(weight.name)
    kept = [init for init in graph.initializer if init.name not in replaced]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save_model(model, str(out_path))
    count = sum(node.op_type == "MatMulNBits" for node in nodes)
    log.info("blockwise_int8 matmuls=%d block=%d path=%s", count, block, out_path)
    return count
