#!/usr/bin/env python3
"""``memory index`` of this repository: the first run, a re-sync with nothing changed, and a
re-sync after one file changed (issue 34's target: ≤ 2 s).

The repository's tracked files (``git ls-files``) are copied to a temporary folder (so one of them
can be edited), a fresh data dir is made with the chosen embedder, and the folder is indexed
through ``LocalNode.memory_index`` exactly as ``crystalmesh memory index`` runs it without a node.
Times are the operation's own (the CLI adds its start-up and the embedder's load).

Usage: ``.venv/bin/python scripts/bench_index.py [--embedder minilm] [--source .] [--smoke]``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import add_smoke_flag, print_result, smoke

REPO = Path(__file__).resolve().parents[1]
EDITED = "README.md"


def copy_tracked(source: Path, target: Path, under: str) -> int:
    listed = subprocess.run(["git", "ls-files", "-z", "--", under], cwd=source, capture_output=True, check=True)
    names = [name for name in listed.stdout.decode().split("\0") if name]
    for name in names:
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        if (source / name).is_file() and not (source / name).is_symlink():
            shutil.copyfile(source / name, destination)
    (target / ".gitignore").write_bytes((source / ".gitignore").read_bytes())
    return len(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--source", type=Path, default=REPO, help="a git checkout to copy")
    parser.add_argument("--under", default=".", help="only the tracked files under this folder")
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), embedder="hashing", under="docs")
    from node.cli.local import LocalNode
    from node.config import load_config
    from node.init import init_node
    from node.memory import Memory

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "repo"
        copied = copy_tracked(arguments.source.resolve(), folder, arguments.under)
        init_node(Path(scratch) / "node", name="bench", embedder=arguments.embedder)
        memory = Memory(load_config(Path(scratch) / "node", environ={}))
        local = LocalNode(lambda: memory)
        try:
            started = time.perf_counter()
            first = local.memory_index([str(folder)])
            first_s = time.perf_counter() - started
            unchanged = local.memory_index([str(folder)])
            edited = next(path for path in (folder / EDITED, *sorted(folder.rglob("*.md"))) if path.exists())
            edited.write_text(edited.read_text() + "\n\nOne more paragraph, written by the benchmark.\n")
            started = time.perf_counter()
            resync = local.memory_index([str(folder)])
            resync_s = time.perf_counter() - started
        finally:
            memory.close()
    print_result({
        "embedder": arguments.embedder, "files_copied": copied, "files": first["files"],
        "chunks": first["chunks"]["added"], "first_s": round(first_s, 2),
        "chunks_per_s": round(first["chunks"]["added"] / first_s, 1) if first_s else None,
        "resync_unchanged_s": unchanged["seconds"], "resync_one_file_s": round(resync_s, 3),
        "resync_one_file": {"file": str(edited.relative_to(folder)), "chunks": resync["chunks"]},
    })


if __name__ == "__main__":
    sys.exit(main())
