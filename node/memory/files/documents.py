"""A file's bytes judged, decoded and cut into the texts that become its memories (pure).

Every byte of a file may be crafted: a NUL in the first 8 KiB makes it binary
(git's test), a UTF-8 byte order mark is dropped, bytes that are not UTF-8 are
decoded as U+FFFD when they are rare (at most 1 % of the text; the file is
counted ``replaced``) and the file is skipped (``not_utf8``) when they are not;
control characters go and every line is bounded (``chunking.Lines``).

Each chunk's memory text opens with a line naming where it comes from, the
file's absolute path and the chunk's label (``/home/me/notes/deploy.md › Rollback``):
the reader of a hit sees its place, search finds a chunk by its file and
section names, and two files holding the same words are still two memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from node.memory.files.chunking import (
    MAX_CHUNK_CHARS,
    Chunk,
    Lines,
    markdown_sections,
    sections_to_chunks,
    text_sections,
)
from node.memory.files.code import python_sections, source_family, source_sections

BINARY_SNIFF_BYTES = 8192
MAX_REPLACED_SHARE = 0.01
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".mdown", ".mkd"})


@dataclass(frozen=True)
class Decoded:
    text: str | None  # None: skipped, ``reason`` says why
    reason: str = ""  # "binary" | "not_utf8" when skipped; "replaced" when a few bytes were not UTF-8


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def decode(data: bytes) -> Decoded:
    """A file's bytes as text, or why not (see the module docstring)."""
    if is_binary(data):
        return Decoded(None, "binary")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return Decoded(data.decode("utf-8"))
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
    if text.count("\ufffd") > MAX_REPLACED_SHARE * max(len(text), 1):
        return Decoded(None, "not_utf8")
    return Decoded(text, "replaced")


def family_of(name: str) -> str:
    """``markdown``, ``python``, a source family (``node.memory.files.code.FAMILIES``) or ``text``."""
    if PurePosixPath(name).suffix.lower() in MARKDOWN_SUFFIXES:
        return "markdown"
    return source_family(name) or "text"


def chunk_file(name: str, text: str, max_chars: int = MAX_CHUNK_CHARS) -> tuple[list[Chunk], Lines]:
    """The chunks of a file's text (``name`` chooses the chunker) and the lines they were cut from."""
    lines = Lines.of(text)
    family = family_of(name)
    if family == "markdown":
        sections = markdown_sections(lines.lines)
    elif family == "python":
        sections = python_sections(lines.lines, max_chars)
    elif family == "text":
        sections = text_sections(lines.lines)
    else:  # definitions found by a pattern: a run of one-line constants is one memory, not many
        return sections_to_chunks(source_sections(family, lines.lines), lines.lines, max_chars, True), lines
    return sections_to_chunks(sections, lines.lines, max_chars), lines


def memory_text(path: str, chunk: Chunk) -> str:
    """What is stored and searched for one chunk: its place, then its lines."""
    place = f"{path} › {chunk.label}" if chunk.label else path
    return f"{place}\n{chunk.text}".strip()
