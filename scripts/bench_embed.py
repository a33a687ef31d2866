#!/usr/bin/env python
"""Sentences per second of an ONNX embedder, fp32 and int8, on the same corpus in one run.

Corpus: the memories and queries of tests/data/retrieval_set.json, repeated
to ``--sentences``. Each precision is warmed up once, then timed over
``--rounds`` passes (best pass reported). The machine's 1-minute load average
before and after is reported (the machine is shared). The last line is one
JSON object.

    .venv/bin/python scripts/bench_embed.py [--embedder minilm|mpnet] [--sentences 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.memory.embedder import SESSION_THREADS, MiniLMEmbedder, MPNetEmbedder, OnnxEmbedder

DATA_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval_set.json"
TARGET_SENTENCES_PER_S = 500


def corpus(size: int) -> list[str]:
    data = json.loads(DATA_PATH.read_text())
    texts = [memory["text"] for memory in data["memories"]] + [query["text"] for query in data["queries"]]
    return [texts[index % len(texts)] for index in range(size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--embedder", choices=("minilm", "mpnet"), default="minilm")
    arguments = parser.parse_args()
    model: type[OnnxEmbedder] = MPNetEmbedder if arguments.embedder == "mpnet" else MiniLMEmbedder

    texts = corpus(arguments.sentences)
    result: dict[str, object] = {
        "embedder": arguments.embedder,
        "sentences": len(texts),
        "threads": SESSION_THREADS,
        "batch_size": arguments.batch_size,
        "load_average_before": round(os.getloadavg()[0], 2),
    }
    vectors: dict[str, np.ndarray] = {}
    for precision in ("fp32", "int8"):
        started = time.perf_counter()
        embedder = model(precision, batch_size=arguments.batch_size)  # type: ignore[arg-type]
        load_s = time.perf_counter() - started
        embedder.embed(texts[:64])
        best_s = float("inf")
        for _ in range(arguments.rounds):
            started = time.perf_counter()
            vectors[precision] = embedder.embed(texts)
            best_s = min(best_s, time.perf_counter() - started)
        rate = len(texts) / best_s
        result[f"{precision}_sentences_per_s"] = round(rate, 1)
        result[f"{precision}_load_s"] = round(load_s, 2)
        print(f"{embedder.name}: {rate:,.0f} sentences/s (load {load_s:.2f}s)")
    ratio = float(result["int8_sentences_per_s"]) / float(result["fp32_sentences_per_s"])  # type: ignore[arg-type]
    agreement = (vectors["fp32"] * vectors["int8"]).sum(axis=1)
    result["int8_over_fp32"] = round(ratio, 2)
    result["int8_fp32_cosine_min"] = round(float(agreement.min()), 4)
    result["int8_fp32_cosine_mean"] = round(float(agreement.mean()), 4)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    result["meets_target"] = float(result["int8_sentences_per_s"]) >= TARGET_SENTENCES_PER_S  # type: ignore[arg-type]
    print(f"int8/fp32 speed ratio {ratio:.2f}; int8 vs fp32 cosine min {agreement.min():.4f} mean {agreement.mean():.4f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
