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


def test_a_reach_into_another_packages_or_a_librarys_private_member_is_reported(
        tmp_path: Path) -> None:
    files = dict(CLEAN)
    files["node/market/seller.py"] = (
        "class Seller:\n"
        "    def __init__(self) -> None:\n"
        "        self._stock = 1\n\n"
        "    def _price(self) -> int:\n"
        "        return self._stock\n\n"  # its own member: fine
        "def sell() -> None: ...\n")
    files["node/market/desk.py"] = (
        "from node.market.seller import Seller\n\n"
        "def stock(seller: Seller) -> int:\n"
        "    return seller._price()\n")  # same package: fine
    files["node/api/app.py"] = (
        "from node.market import sell\n\n"
        "def peek(seller, host) -> int:\n"
        "    return seller._stock + host._peerstore\n")  # ours of another package; a library's
    files["node/api/relay.py"] = (
        "class Relay(LibraryRelay):\n"
        "    def reserve(self) -> None:\n"
        "        self._handle_reserve()\n")  # inherited from a library class
    assert _check(_tree(tmp_path, files)) == [
        "reach-in: node/api/app.py:4 ._stock is private to another package (ask for a public "
        "hook, or list a library's in node/net/libp2p_compat.py)",
        "reach-in: node/api/app.py:4 ._peerstore is private to a library (ask for a public "
        "hook, or list a library's in node/net/libp2p_compat.py)",
        "reach-in: node/api/relay.py:3 ._handle_reserve is private to a library (ask for a "
        "public hook, or list a library's in node/net/libp2p_compat.py)",
    ]
    files["node/net/__init__.py"] = ""
    files["node/net/libp2p_compat.py"] = "def peers(host):\n    return host._peerstore\n"
    files["node/api/app.py"] = "from node.market import sell\n"
    files["node/api/relay.py"] = ""
    assert _check(_tree(tmp_path, files)) == []  # the compatibility module may


def test_a_callable_assigned_to_another_object_after_construction_is_reported(
        tmp_path: Path) -> None:
    files = dict(CLEAN)
    files["node/service.py"] = (
        "import functools\n"
        "from node.market import sell\nfrom node.api import app\n\n"
        "class Service:\n"
        "    def __init__(self, buyer, market) -> None:\n"
        "        self.buyer = buyer\n"
        "        self.on_sale = self._on_sale\n"  # its own attribute: fine
        "        self.buyer.gate = self._gate\n"
        "        buyer.on_outcome = lambda key: None\n"
        "        market.spawn = functools.partial(print, 1)\n"
        "        market.limit = 3\n"  # data, not a collaborator: fine
        "        market.name = self.name\n\n"  # a value: fine
        "    async def _gate(self, key: bytes) -> bool:\n        return True\n\n"
        "    async def _on_sale(self) -> None: ...\n")
    assert _check(_tree(tmp_path, files)) == [
        f"late collaborator: node/service.py:{line} .{name} of another object is assigned a "
        "callable (make it a constructor argument)"
        for line, name in ((9, "gate"), (10, "on_outcome"), (11, "spawn"))]
