"""scripts/check_layers.py on a small fake tree: cycles, upward imports, imports past a
package's face and crowded folders are reported; long modules are only a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "check_layers.py"


def _check(root: Path) -> list[str]:
    """The violations ``scripts/check_layers.py ROOT`` prints; exit 1 and a FAILED verdict with them."""
    run = subprocess.run([sys.executable, str(SCRIPT), str(root)],
                         capture_output=True, text=True, check=False)
    *lines, verdict = run.stdout.splitlines()
    problems = [line for line in lines if not line.startswith("warning: ")]
    if problems:
        assert run.returncode == 1 and verdict.startswith("check_layers: FAILED"), run.stdout
    else:
        assert run.returncode == 0 and verdict.startswith("check_layers: ok"), run.stdout
    return problems


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


CLEAN = {
    "protocol/__init__.py": "",
    "protocol/codec.py": "import json\n",
    "node/__init__.py": "",
    "node/service.py": "from node.market import sell\nfrom node.api import app\n",
    "node/api/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from node.api import app as app\n",
    "node/api/app.py": "from node.market import sell\n",
    "node/market/__init__.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from node.market.seller import sell as sell\n"),
    "node/market/seller.py": "from protocol.codec import json\n\ndef sell() -> None: ...\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert _check(_tree(tmp_path, CLEAN)) == []


def test_cycles_and_upward_imports_are_each_reported(tmp_path: Path) -> None:
    files = dict(CLEAN)
    files["node/market/seller.py"] = "from ..api.metrics import count\n"  # concept -> api
    files["node/api/metrics.py"] = "count = 0\n"
    files["protocol/codec.py"] = "from node import market\n"  # protocol -> node
    files["node/memory/__init__.py"] = "from node.crystals import store\n"
    files["node/crystals/__init__.py"] = ""
    files["node/crystals/store.py"] = "import node.memory.facade\n"
    files["node/memory/facade.py"] = "from . import other\n"
    files["node/memory/other.py"] = "from .facade import x  # noqa\nx = 1\n"
    problems = _check(_tree(tmp_path, files))
    text = "\n".join(problems)
    assert "upward import: node/market/seller.py:1 node.market.seller -> node.api.metrics" in text
    assert "upward import: protocol/codec.py:1 protocol.codec -> node.market" in text
    assert "module cycle: node.memory.facade -> node.memory.other -> node.memory.facade" in text
    assert "package cycle: node.crystals -> node.memory -> node.crystals" in text


def test_imports_past_a_face_are_reported(tmp_path: Path) -> None:
    files = dict(CLEAN)
    files["node/api/app.py"] = "from node.market.seller import sell\n"  # a room, not the face
    files["node/service.py"] = "from node.market import seller, buy\nfrom node.api import app\n"
    assert _check(_tree(tmp_path, files)) == [
        "past a face: node/api/app.py:1 node.market.seller is behind the face of node.market",
        "past a face: node/service.py:1 node.market does not export seller (add it to its face)",
        "past a face: node/service.py:1 node.market does not export buy (add it to its face)",
    ]


def test_a_crowded_folder_is_reported_and_a_long_module_only_warned(tmp_path: Path) -> None:
    files = dict(CLEAN)
    files.update({f"node/market/room{i}.py": "x = 1\n" for i in range(14)})  # 15 with seller
    assert _check(_tree(tmp_path, files)) == []
    files["node/market/room14.py"] = "x = 1\n" * 600
    root = _tree(tmp_path, files)
    assert _check(root) == ["crowded folder: node/market holds 16 modules "
                            "(more than 15: give it wings by concept)"]
    run = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True,
                         check=False)
    assert "warning: long module: node/market/room14.py has 600 lines" in run.stdout.splitlines()
