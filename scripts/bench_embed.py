#!/usr/bin/env python
"""Sentences per second of an ONNX embedder, fp32 and int8, on the same corpus in one run.

Corpus: the memories and queries of tests/data/retrieval_set.json, repeated
to ``--sentences``. Each precision is warmed up once, then timed over
``--rounds`` passes (best pass reported). The machine's 1-minute load average
before and after is reported (the machine is shared). The last line is one
JSON object.

    .venv/bin/python scripts/bench_embed.py [--embedder minilm|mpnet] [--sentences 2000] [--rounds 3]
        [--check-reference]

With ``--embedder mpnet`` the default MiniLM int8 is timed in the same rounds
(``minilm_int8_sentences_per_s``). The second opinion (node.memory.search.second_opinion:
paraphrase-MiniLM-L3 int8 beside MiniLM, MiniLM beside MPNet) is timed in the same
rounds too, and ``with_second_opinion_sentences_per_s`` is what ingest embeds with
both (the int8 embedder's and its second's best times added). ``--smoke``: 64
sentences, one round (the models still load: a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from _bench import add_smoke_flag, print_result, smoke

from node.memory.embedding.embedder import (
    SESSION_THREADS,
    L3Embedder,
    MiniLMEmbedder,
    MPNetEmbedder,
    OnnxEmbedder,
)
from node.memory.embedding.embedder_mpnet import read_mpnet_shape
from node.memory.embedding.embedder_onnx import default_cache_dir, load_weights, read_shape
from node.memory.embedding.embedder_reference import reference_embed, reference_embed_mpnet

DATA_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval_set.json"
TARGET_SENTENCES_PER_S = 500


def corpus(size: int) -> list[str]:
    data = json.loads(DATA_PATH.read_text())
    texts = [memory["text"] for memory in data["memories"]] + [query["text"] for query in data["queries"]]
    return [texts[index % len(texts)] for index in range(size)]


def reference_diff(name: str, fp32: OnnxEmbedder, texts: list[str]) -> float:
    """Max abs difference between the fp32 graph and the plain-numpy forward pass of the same weights."""
    directory = fp32.source.locate(default_cache_dir())
    input_ids, attention_mask = fp32.tokenize(texts)
    weights = load_weights(directory)
    if name == "mpnet":
        expected = reference_embed_mpnet(weights, read_mpnet_shape(directory / "config.json"), input_ids, attention_mask)
    else:
        expected = reference_embed(weights, read_shape(directory / "config.json"), input_ids, attention_mask)
    return float(np.abs(fp32.embed(texts) - expected).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--embedder", choices=("minilm", "mpnet"), default="minilm")
    parser.add_argument(
        "--check-reference", action="store_true", help="also compare the fp32 graph with the numpy forward pass"
    )
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), sentences=64, rounds=1)
    model: type[OnnxEmbedder] = MPNetEmbedder if arguments.embedder == "mpnet" else MiniLMEmbedder

    texts = corpus(arguments.sentences)
    result: dict[str, object] = {
        "embedder": arguments.embedder,
        "sentences": len(texts),
        "threads": SESSION_THREADS,
        "batch_size": arguments.batch_size,
        "load_average_before": round(os.getloadavg()[0], 2),
    }
    timed: dict[str, OnnxEmbedder] = {}
    for precision in ("fp32", "int8"):
        started = time.perf_counter()
        timed[precision] = model(precision, batch_size=arguments.batch_size)  # type: ignore[arg-type]
        result[f"{precision}_load_s"] = round(time.perf_counter() - started, 2)
    if model is not MiniLMEmbedder:  # the default as a second baseline, timed in the same rounds
        timed["minilm_int8"] = MiniLMEmbedder("int8", batch_size=arguments.batch_size)
        second = "minilm_int8"  # MPNet's second opinion
    else:
        timed["l3_int8"] = L3Embedder("int8", batch_size=arguments.batch_size)
        second = "l3_int8"
    vectors: dict[str, np.ndarray] = {}
    best_s = dict.fromkeys(timed, float("inf"))
    for embedder in timed.values():
        embedder.embed(texts[:64])
    for _ in range(arguments.rounds):  # rounds interleaved, so load changes hit every embedder alike
        for label, embedder in timed.items():
            started = time.perf_counter()
            vectors[label] = embedder.embed(texts)
            best_s[label] = min(best_s[label], time.perf_counter() - started)
    for label, embedder in timed.items():
        rate = len(texts) / best_s[label]
        result[f"{label}_sentences_per_s"] = round(rate, 1)
        print(f"{embedder.name}: {rate:,.0f} sentences/s")
    pair = len(texts) / (best_s["int8"] + best_s[second])
    result["with_second_opinion_sentences_per_s"] = round(pair, 1)
    print(f"int8 with its second opinion ({timed[second].name}): {pair:,.0f} sentences/s")
    if arguments.check_reference:
        result["reference_max_abs_diff"] = reference_diff(arguments.embedder, timed["fp32"], texts[:4])
        print(f"fp32 graph vs numpy reference: max abs diff {result['reference_max_abs_diff']:.2e}")
    ratio = float(result["int8_sentences_per_s"]) / float(result["fp32_sentences_per_s"])  # type: ignore[arg-type]
    agreement = (vectors["fp32"] * vectors["int8"]).sum(axis=1)
    result["int8_over_fp32"] = round(ratio, 2)
    result["int8_fp32_cosine_min"] = round(float(agreement.min()), 4)
    result["int8_fp32_cosine_mean"] = round(float(agreement.mean()), 4)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    result["meets_target"] = float(result["int8_sentences_per_s"]) >= TARGET_SENTENCES_PER_S  # type: ignore[arg-type]
    result["with_second_opinion_meets_300"] = pair >= 300
    print(f"int8/fp32 speed ratio {ratio:.2f}; int8 vs fp32 cosine min {agreement.min():.4f} mean {agreement.mean():.4f}")
    print_result(result)


if __name__ == "__main__":
    main()
