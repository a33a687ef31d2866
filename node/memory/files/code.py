"""Source files in sections by their top-level definitions (pure: names and lines in, sections out).

Python is read with ``ast``: each top-level ``def`` / ``class`` is a section from
its decorators (and the comment lines right above) to its last line, keyed
``def name`` / ``class Name``; the code between definitions is keyed by the
definition before it (``code after def name``), so its key survives edits
elsewhere. A class too long for one chunk is cut at its methods (``class Name ›
def method``). A file that does not parse is read as plain text.

Other families are cut at the lines that open a top-level definition, one
regular expression per family (a definition starts at column 0 and runs to the
next one): good enough to keep a function in one chunk and name it, without a
parser per language.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from node.memory.files.chunking import MAX_CHUNK_CHARS, Section, text_sections

_NAME = r"(?P<name>[A-Za-z_$][\w$]*)"
FAMILIES: dict[str, tuple[frozenset[str], re.Pattern[str]]] = {
    "javascript": (frozenset({".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"}), re.compile(
        r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
        rf"(?P<kind>function\*?|class|interface|type|enum|namespace|const|let|var)\s+{_NAME}")),
    "go": (frozenset({".go"}), re.compile(
        rf"^(?P<kind>func|type|var|const)\s+(?:\([^)]*\)\s*)?{_NAME}")),
    "rust": (frozenset({".rs"}), re.compile(
        r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?"
        rf"(?P<kind>fn|struct|enum|trait|impl|mod|type|const|static|union|macro_rules!)\s*(?:<[^>]*>\s*)?{_NAME}")),
    "c": (frozenset({".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".m", ".mm"}), re.compile(
        rf"^(?:(?P<kind>struct|class|union|enum|namespace|typedef)\s+{_NAME}"
        r"|(?:[A-Za-z_][\w:<>,*&\s]*?[\s*&])?(?P<function>[A-Za-z_][\w:~]*)\s*\([^;]*$)")),
    "jvm": (frozenset({".java", ".kt", ".kts", ".scala", ".cs", ".swift", ".dart", ".groovy"}), re.compile(
        r"^(?:(?:public|private|protected|internal|abstract|final|sealed|data|open|static|partial|"
        r"export|inline|suspend|override)\s+)*"
        rf"(?P<kind>class|interface|enum|record|object|trait|struct|fun|func|def|extension|protocol)\s+{_NAME}")),
    "ruby": (frozenset({".rb"}), re.compile(r"^(?P<kind>class|module|def)\s+(?P<name>[\w:.?!=]+)")),
    "php": (frozenset({".php"}), re.compile(
        rf"^(?:(?:abstract|final)\s+)?(?P<kind>function|class|interface|trait|enum)\s+{_NAME}")),
    "shell": (frozenset({".sh", ".bash", ".zsh"}), re.compile(
        r"^(?:function\s+)?(?P<name>[\w.-]+)\s*\(\)\s*\{?\s*$|^function\s+(?P<fname>[\w.-]+)")),
    "solidity": (frozenset({".sol"}), re.compile(
        r"^(?:abstract\s+)?(?P<kind>contract|library|interface|struct|enum|function|event|error)\s+"
        + _NAME)),
    "toml": (frozenset({".toml"}), re.compile(r"^\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?")),
    "yaml": (frozenset({".yaml", ".yml"}), re.compile(r"^(?P<name>[\w.-]+)\s*:")),
    "ini": (frozenset({".ini", ".cfg", ".conf"}), re.compile(r"^\[\s*(?P<name>[^\]]+?)\s*\]")),
    "make": (frozenset({".mk", ".mak"}), re.compile(r"^(?P<name>[\w./%-]+)\s*:(?!=)")),
}
_BY_SUFFIX = {suffix: family for family, (suffixes, _) in FAMILIES.items() for suffix in suffixes}
_BY_NAME = {"makefile": "make", "gnumakefile": "make"}
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|--|;)")


def source_family(name: str) -> str | None:
    """``python``, a key of :data:`FAMILIES`, or None (read as plain text)."""
    path = PurePosixPath(name)
    suffix = path.suffix.lower()
    if suffix in (".py", ".pyi"):
        return "python"
    return _BY_SUFFIX.get(suffix) or _BY_NAME.get(path.name.lower())


def _with_comments(start: int, lines: Sequence[str], floor: int) -> int:
    """``start`` moved up over the comment lines directly above it (not past ``floor``)."""
    while start > floor and _COMMENT.match(lines[start - 1]) and lines[start - 1].strip():
        start -= 1
    return start


def _between(definitions: list[Section], lines: Sequence[str], begin: int, end: int,
             head_key: str, head_label: str) -> list[Section]:
    """``definitions`` (sorted, inside ``[begin, end)``) and the code around them as sections."""
    sections: list[Section] = []
    cursor, after_key, after_label = begin, head_key, head_label
    for definition in definitions:
        if definition.start > cursor:
            sections.append(Section(cursor, definition.start, after_key, after_label))
        sections.append(definition)
        cursor = definition.end
        after_key = after_label = f"code after {definition.key}"
    if end > cursor:
        sections.append(Section(cursor, end, after_key, after_label))
    return sections


def _definition_key(node: ast.stmt) -> str:
    return f"class {node.name}" if isinstance(node, ast.ClassDef) else f"def {getattr(node, 'name', '?')}"


def _span(node: ast.stmt, lines: Sequence[str], floor: int) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", [])
    first = min([node.lineno, *(d.lineno for d in decorators)]) - 1
    return _with_comments(first, lines, floor), node.end_lineno or node.lineno


def python_sections(lines: Sequence[str], max_chars: int = MAX_CHUNK_CHARS) -> list[Section]:
    """Top-level definitions and the code between them (see the module docstring)."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text_sections(lines)
    definitions: list[Section] = []
    floor = 0
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        start, end = _span(node, lines, floor)
        key = _definition_key(node)
        if isinstance(node, ast.ClassDef) and sum(len(line) + 1 for line in lines[start:end]) > max_chars:
            definitions.extend(_class_sections(node, key, start, end, lines))
        else:
            definitions.append(Section(start, end, key, key))
        floor = end
    if not definitions:
        return [Section(0, len(lines), "(module)", "module")]
    return _between(definitions, lines, 0, len(lines), "(module head)", "module")


def _class_sections(node: ast.ClassDef, key: str, start: int, end: int,
                    lines: Sequence[str]) -> list[Section]:
    """A long class cut at its methods: the class line and body before its first method, then
    each method with the class code that follows it."""
    methods: list[Section] = []
    floor = start + 1
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            item_start, item_end = _span(item, lines, floor)
            name = f"{key} › {_definition_key(item)}"
            methods.append(Section(item_start, item_end, name, name))
            floor = item_end
    if not methods:
        return [Section(start, end, key, key)]
    sections = [Section(start, methods[0].start, key, key)]
    for index, method in enumerate(methods):
        until = methods[index + 1].start if index + 1 < len(methods) else end
        sections.append(Section(method.start, until, method.key, method.label))
    return sections


def source_sections(family: str, lines: Sequence[str]) -> list[Section]:
    """A file of ``family`` cut at its top-level definition lines."""
    pattern = FAMILIES[family][1]
    starts: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        if not line or line[0].isspace():
            continue
        found = pattern.match(line)
        if found is None:
            continue
        groups = found.groupdict()
        name = groups.get("name") or groups.get("function") or groups.get("fname") or "?"
        kind = groups.get("kind") or ("function" if groups.get("function") or groups.get("fname") else "")
        starts.append((index, f"{kind} {name}".strip()))
    if not starts:
        return text_sections(lines)
    definitions: list[Section] = []
    floor = 0
    for position, (index, key) in enumerate(starts):
        begin = _with_comments(index, lines, floor)
        end = starts[position + 1][0] if position + 1 < len(starts) else len(lines)
        if position + 1 < len(starts):
            end = _with_comments(end, lines, index + 1)
        definitions.append(Section(begin, end, key, key))
        floor = end
    return _between(definitions, lines, 0, len(lines), "(head)", "")
