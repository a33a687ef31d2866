"""Issue 12 deliver 2 for the embedder cache: a built ONNX file whose bytes changed is rebuilt,
not loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

from node.memory.embedding import embedder_onnx


def test_a_damaged_int8_model_is_rebuilt(tmp_path: Path) -> None:
    built = embedder_onnx.build_model()  # the machine's cache (scripts/setup built it)
    cache = tmp_path / "models"
    cache.mkdir()
    for path in (built.fp32_path, built.int8_path):
        shutil.copy(path, cache / path.name)
    good = embedder_onnx.build_model(cache)  # no digests yet: recorded on first use
    assert embedder_onnx._digest_path(good.int8_path).is_file()
    original = good.int8_path.read_bytes()

    damaged = bytearray(original)
    middle = len(damaged) // 2
    damaged[middle:middle + 4096] = bytes(4096)
    good.int8_path.write_bytes(bytes(damaged))
    rebuilt = embedder_onnx.build_model(cache)
    assert rebuilt.int8_path.read_bytes() != bytes(damaged)
    assert embedder_onnx._digest_ok(rebuilt.int8_path)
