#!/usr/bin/env python3
"""Check the import layering of ``protocol/`` and ``node/`` (``ast``: nothing checked is imported).

Fails (exit 1) on:

* an import cycle between modules (``a -> b -> ... -> a``) or between the
  packages directly under ``node/`` (``node.crystals <-> node.memory``);
* an upward import: ``protocol`` importing anything of ``node``, or a concept
  (every ``node.*`` package or module that is not a top layer) importing a top
  layer: ``node.api``, ``node.cli``, ``node.service``, ``node.agent``;
* an import past a package's face: outside a package under ``node/``, code imports
  only the names its ``__init__`` exports (``node/face.py``: the imports under
  ``if TYPE_CHECKING:``), never a module behind it. ``protocol/`` is a spec whose
  modules are each public; tests and scripts may open a room to test it;
* a folder holding more than ``MAX_MODULES_PER_FOLDER`` modules directly (STYLE.md:
  a folder that holds more wants wings, subpackages by concept).

A module of ``LONG_MODULE_LINES`` lines or more is reported as a warning, not a
failure: a module is as long as its one concept needs.

Imports inside ``if TYPE_CHECKING:`` blocks count: they are still a dependency
of the design, only deferred. Usage: ``scripts/check_layers.py [ROOT]``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from node.face import exports_of

PACKAGES = ("protocol", "node")
TOP_LAYERS = ("node.api", "node.cli", "node.service", "node.agent")
# Entry points that wire everything; they may import the top layers.
WIRING = ("node.devnet", "node.__main__")
MAX_MODULES_PER_FOLDER = 15
LONG_MODULE_LINES = 600


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def discover(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """All modules of ``packages`` under ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for package in packages:
        base = root / package
        if base.is_dir():
            for path in sorted(base.rglob("*.py")):
                found[module_name(root, path)] = path
    return found


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import of a known module in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node)
            # ``from pkg import mod`` names ``pkg.mod``; ``from pkg import func`` falls back to ``pkg``.
            targets = [f"{base}.{alias.name}" for alias in node.names]
        seen: set[str] = set()
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name and known not in seen:
                seen.add(known)
                yield known, node.lineno


def _known(target: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that ``target`` names (``a.b.func`` -> ``a.b``)."""
    parts = target.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def upward(source: str, target: str) -> str | None:
    """Why ``source -> target`` goes upward, or None."""
    if _within(source, "protocol") and _within(target, "node"):
        return "protocol must not import node"
    if not _within(source, "node") or any(_within(source, w) for w in WIRING):
        return None
    source_top = next((t for t in TOP_LAYERS if _within(source, t)), None)
    target_top = next((t for t in TOP_LAYERS if _within(target, t)), None)
    if target_top is not None and source_top is None and source != "node":
        return f"concept must not import the top layer {target_top}"
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_cycle_path(graph, set(component)))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _cycle_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A concrete cycle inside a strongly connected component (shortest from its first node)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ()) & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return sorted(component)


def package_of(name: str) -> str:
    """``node.crystals.store`` -> ``node.crystals``; ``protocol.x`` -> ``protocol``."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "node" and len(parts) > 1 else parts[0]


def _packages(modules: dict[str, Path]) -> set[str]:
    return {name for name, path in modules.items() if path.name == "__init__.py"}


def past_the_face(source: str, node: ast.ImportFrom, module: str, modules: dict[str, Path],
                  faces: dict[str, set[str]]) -> Iterator[str]:
    """Why each name of ``from module import ...`` in ``source`` reaches past a face."""
    if not _within(module, "node"):
        return
    for alias in node.names:
        target = f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
        parts = target.split(".")
        for depth in range(2, len(parts) + 1):
            package = ".".join(parts[:depth])
            if package not in faces or _within(source, package):
                continue
            # The outermost package that holds the target and not the importer: its face.
            if module != package:
                yield f"{target} is behind the face of {package}"
            elif alias.name not in faces[package]:
                yield f"{package} does not export {alias.name} (add it to its face)"
            break


def face_problems(root: Path, modules: dict[str, Path]) -> Iterator[str]:
    packages = _packages(modules)
    # What each face exports, read by the same rule the face itself runs on (node/face.py).
    faces = {package: set(exports_of(modules[package].read_text(encoding="utf-8")))
             for package in packages}
    for name, path in modules.items():
        if path.name == "__init__.py" or not _within(name, "node"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = _resolve(name, False, node)
                for why in past_the_face(name, node, module, modules, faces):
                    yield f"past a face: {path.relative_to(root)}:{node.lineno} {why}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    owner = next((p for p in sorted(packages) if _within(alias.name, p)
                                  and not _within(name, p) and alias.name != p), None)
                    if owner is not None:
                        yield (f"past a face: {path.relative_to(root)}:{node.lineno} "
                               f"import {alias.name} (import the face of {owner})")


def crowded_folders(root: Path, modules: dict[str, Path]) -> Iterator[str]:
    folders: dict[Path, int] = {}
    for path in modules.values():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    for folder, count in sorted(folders.items()):
        if count > MAX_MODULES_PER_FOLDER:
            yield (f"crowded folder: {folder.relative_to(root)} holds {count} modules "
                   f"(more than {MAX_MODULES_PER_FOLDER}: give it wings by concept)")


def long_modules(root: Path) -> list[str]:
    """Warnings: modules of ``LONG_MODULE_LINES`` lines or more."""
    found = []
    for path in discover(root).values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines >= LONG_MODULE_LINES:
            found.append(f"warning: long module: {path.relative_to(root)} has {lines} lines")
    return found


def check(root: Path) -> list[str]:
    """Every violation under ``root``, one readable line each."""
    modules = discover(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    problems: list[str] = []
    for name, path in modules.items():
        for target, line in imports_of(name, path, modules):
            graph[name].add(target)
            reason = upward(name, target)
            if reason:
                where = path.relative_to(root)
                problems.append(f"upward import: {where}:{line} {name} -> {target} ({reason})")
    problems.extend(face_problems(root, modules))
    problems.extend(crowded_folders(root, modules))
    for cycle in cycles(graph):
        problems.append("module cycle: " + " -> ".join(cycle))
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        source = package_of(name)
        packages.setdefault(source, set()).update(
            package_of(t) for t in targets if package_of(t) != source
        )
    for cycle in cycles(packages):
        problems.append("package cycle: " + " -> ".join(cycle))
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(root)
    for line in long_modules(root):
        print(line)
    for problem in problems:
        print(problem)
    modules = len(discover(root))
    if problems:
        print(f"check_layers: FAILED, {len(problems)} violation(s) in {modules} modules")
        return 1
    print(f"check_layers: ok, {modules} modules, no cycle, no upward import, no import past "
          f"a face, no folder of more than {MAX_MODULES_PER_FOLDER} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
