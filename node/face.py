"""Package faces: what a package exports, written once, imported on first use.

Rule: outside a package, code imports only its face (``from node.memory import
Memory``), never the rooms behind it (``node.memory.facade``). A package's
``__init__`` writes its face as the imports under ``if TYPE_CHECKING:`` (so a
reader and the type checker see exactly what it exports, and where each name
lives) and ends with ``__getattr__ = face(__name__)``. A name's module is imported
the first time the name is asked for (PEP 562), so a face costs nothing at import
time and adds no import cycle: ``import node.memory`` loads no embedder, and a
face whose rooms import ``node.config`` can itself be imported by ``node.config``.

Enforced by ``scripts/check_layers.py``, which reads the same block. The one
exception is the test suite and the scripts: they may open a room to test it.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def exports_of(source: str) -> dict[str, tuple[str, str]]:
    """``{exported name: (module, name in that module)}`` from a face's TYPE_CHECKING block."""
    exports: dict[str, tuple[str, str]] = {}
    for statement in ast.parse(source).body:
        if not (isinstance(statement, ast.If) and isinstance(statement.test, ast.Name)
                and statement.test.id == "TYPE_CHECKING"):
            continue
        for item in statement.body:
            if isinstance(item, ast.ImportFrom) and item.module and item.level == 0:
                for alias in item.names:
                    exports[alias.asname or alias.name] = (item.module, alias.name)
    return exports


def face(package: str) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``'s face."""
    module = sys.modules[package]
    exports = exports_of(Path(str(module.__file__)).read_text(encoding="utf-8"))

    def __getattr__(name: str) -> object:
        try:
            source, attribute = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        if source == package:  # a room exported as a module: ``from node.crystals import governance``
            value: object = importlib.import_module(f"{package}.{attribute}")
        else:
            value = getattr(importlib.import_module(source), attribute)
        setattr(module, name, value)
        return value

    return __getattr__
