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
  a folder that holds more wants wings, subpackages by concept);
* a reach-in: ``obj._name`` in ``node/`` where ``obj`` is not ``self``/``cls``/``super()``
  and ``_name`` is private to another package: no module of the user's own package
  (``node.market``, ``node.net``, ...) defines it, whether another of our packages does
  or a third-party library does (py-libp2p's private members are used only in
  ``THIRD_PARTY_PRIVATE_ROOMS``, the compatibility modules that list and test them);
* a late collaborator: a callable (a lambda, a ``partial``, a reference to a function
  or method) assigned to an attribute of another object (``self.buyer.gate = ...``,
  ``publisher.on_warning = ...``): collaborators are constructor arguments.

What the two last rules can see: attribute syntax. Types are not inferred, so a private
name that some module of the user's package also defines passes (a false negative), a
private member reached through ``getattr(obj, "_name")`` passes, and a late assignment is
recognised by the shape of its value: a lambda, a ``partial``, a method of ours reached from
``self``, a function of the module. A callable stored in a variable first, a library
object's method (``nursery.start_soon``) and a callable appended to another object's list
pass. Only ``node/`` is checked; tests may wire doubles as they need.
Justified exceptions are listed once, in ``ALLOWED_REACH_INS`` and ``ALLOWED_LATE``.

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
# Where py-libp2p's private members may be touched: the package that patches the library and the
# module that lists every private member the node relies on, with the version checked against.
THIRD_PARTY_PRIVATE_ROOMS = ("node/net/libp2p_compat.py", *(
    f"node/net/libp2p_tuning/{name}.py" for name in (
        "__init__", "connections", "frames", "incoming", "install", "pubsub_receive",
        "pubsub_send")))
# Underscored names that are public API by convention (namedtuple's, the interpreter's).
PUBLIC_UNDERSCORED = frozenset({"_fields", "_make", "_replace", "_asdict", "_field_defaults",
                                "_exit", "_getframe"})
# (module path, private name): why it stays. Nothing else may reach in.
ALLOWED_REACH_INS: dict[tuple[str, str], str] = {
    ("node/agent/mcp_subscriptions.py", "_connection"): "the MCP SDK (2.3) carries a request's "
    "connection only privately; one function reads it (``_connection_of``)",
    ("node/agent/mcp_resources.py", "_lowlevel_server"): "the MCP SDK serves resources/subscribe "
    "only through its low-level server, which MCPServer keeps private",
}
# (module path, attribute assigned): why a callable is assigned after construction there.
ALLOWED_LATE: dict[tuple[str, str], str] = {
    ("node/net/dht.py", "add_peer"): "wraps a py-libp2p routing table in place (our protocol id)",
    ("node/net/dht.py", "add_provider"): "wraps a py-libp2p provider store in place (bounded)",
    ("node/net/host.py", "get_addrs"): "wraps a py-libp2p host in place (relay addresses)",
    ("node/net/service.py", "maybe_connect"): "py-libp2p's auto-connector would redial banned peers",
}


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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def defined_names(tree: ast.AST) -> set[str]:
    """Private names a module defines: functions, classes, module and class attributes,
    ``self._x = ...`` members, and keyword parameters (``_x=`` of a dataclass or call)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
    return {name for name in names if _private(name)}


def _own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: a class's use of its own members."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "super")


def reach_ins(root: Path, modules: dict[str, Path]) -> Iterator[str]:
    """``obj._name`` in ``node/`` where ``_name`` is private to another package."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
             for name, path in modules.items()}
    defined = {name: defined_names(tree) for name, tree in trees.items()}
    by_package: dict[str, set[str]] = {}
    for name, names in defined.items():
        by_package.setdefault(package_of(name), set()).update(names)
    ours = set().union(*defined.values()) if defined else set()
    for name, tree in trees.items():
        if not _within(name, "node"):
            continue
        where = modules[name].relative_to(root).as_posix()
        own_package = by_package[package_of(name)]
        if where in THIRD_PARTY_PRIVATE_ROOMS:
            continue
        for node in ast.walk(tree):
            # ``self._x`` counts too when no module of the package defines ``_x``: a member
            # inherited from a library class (``RelayProtocol(CircuitV2Protocol)``).
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if node.attr in own_package or (where, node.attr) in ALLOWED_REACH_INS:
                continue
            owner = "another package" if node.attr in ours else "a library"
            yield (f"reach-in: {where}:{node.lineno} .{node.attr} is private to {owner} "
                   "(ask for a public hook, or list a library's in node/net/libp2p_compat.py)")


def _callable_value(value: ast.expr, methods: set[str], functions: set[str]) -> bool:
    """A lambda, a ``partial(...)``, a bound method reached from ``self`` (``self._gate``,
    ``self.net.ask_network``) or a function of the module (``_no_auto_connect``)."""
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "partial"
    if isinstance(value, ast.Attribute):
        root = value.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return value.attr in methods and _own(root)
    if isinstance(value, ast.Name):
        return value.id in functions
    return False


def _functions(tree: ast.AST) -> set[str]:
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _methods(tree: ast.AST) -> set[str]:
    """Methods defined in a class body, less the names some class declares as a field."""
    methods: set[str] = set()
    fields: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    methods.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields.add(item.target.id)
    return methods - fields


def _data_names(tree: ast.AST) -> set[str]:
    """Names some code stores a value in: variables, attributes, annotated fields."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def late_collaborators(root: Path, modules: dict[str, Path]) -> Iterator[str]:
    """A callable assigned to an attribute of another object, anywhere in ``node/``."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
             for name, path in modules.items() if _within(name, "node")}
    methods = set().union(*(_methods(tree) for tree in trees.values())) if trees else set()
    for name, tree in trees.items():
        where = modules[name].relative_to(root).as_posix()
        if where in THIRD_PARTY_PRIVATE_ROOMS:  # patches of the library, each documented there
            continue
        functions = _functions(tree) - _data_names(tree) - _methods(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (not isinstance(target, ast.Attribute) or _own(target.value)
                        or (where, target.attr) in ALLOWED_LATE
                        or not _callable_value(node.value, methods, functions)):
                    continue
                yield (f"late collaborator: {where}:{node.lineno} .{target.attr} of another "
                       "object is assigned a callable (make it a constructor argument)")


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
    problems.extend(reach_ins(root, modules))
    problems.extend(late_collaborators(root, modules))
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
          f"a face, no folder of more than {MAX_MODULES_PER_FOLDER} modules, no reach-in, "
          "no late collaborator")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
