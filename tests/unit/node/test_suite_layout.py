"""The suite's import rule (tests/support/__init__.py): tests import no test module and no script.

A test module may import ``tests.support`` and ``tests.fixtures``; shared fixtures
come from conftest.py. Scripts may import ``tests.support`` and nothing else of
``tests``. Scripts are run (a subprocess), never imported or loaded from a path
by a test. Tests are grouped in folders by concept, as the product is: no folder of
the suite holds more than 15 modules directly (``scripts/check_layers.py``'s rule).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHARED = ("tests.support", "tests.fixtures")


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            # ``from tests import x`` names the module in the alias
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if node.module in ("tests", "scripts")]
    return found


def _shared(module: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in SHARED)


def _loads_a_script(path: Path) -> bool:
    """A test that builds a module from a file under scripts/ (importlib, runpy) imports a script."""
    text = path.read_text()
    return ("spec_from_file_location" in text or "run_path" in text) and '"scripts"' in text


def _suite() -> list[Path]:
    return [path for path in (ROOT / "tests").rglob("*.py") if "data" not in path.parts]


def test_tests_import_no_test_module_and_no_script() -> None:
    wrong = []
    for path in _suite():
        for line, module in _imports(path):
            if module in ("tests", "scripts"):
                continue  # the parent of an alias checked on its own
            if (module.startswith("tests.") and not _shared(module)) or module.startswith("scripts"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
        if path != Path(__file__).resolve() and _loads_a_script(path):
            wrong.append(f"{path.relative_to(ROOT)} loads a file under scripts/")
    assert wrong == []


def test_scripts_import_only_the_support_layer_of_tests() -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}"
             for path in (ROOT / "scripts").glob("*.py")
             for line, module in _imports(path)
             if module.startswith("tests") and module != "tests" and not module.startswith("tests.support")]
    assert wrong == []


def test_no_folder_of_the_suite_holds_more_than_15_modules() -> None:
    crowded = {}
    for folder in [ROOT / "tests", *sorted((ROOT / "tests").rglob("*/"))]:
        if "data" in folder.relative_to(ROOT).parts or folder.name == "__pycache__":
            continue
        modules = [path for path in folder.glob("*.py") if path.name not in ("__init__.py", "conftest.py")]
        if len(modules) > 15:
            crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert crowded == {}
