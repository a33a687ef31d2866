"""A file's text in chunks by its structure, each with a stable key and its line range.

Pure functions of a file name and its text (no I/O). ``chunk_file`` picks the
chunker by the name: Markdown by headings, Python by top-level ``def`` /
``class`` (``ast``; plain text when it does not parse), other source families
by their top-level definition lines, everything else by paragraphs. Every chunk
carries its 1-based inclusive line range and a *key* that names it by structure
(heading path, definition name, then an occurrence number), never by line
number: an edit elsewhere in the file leaves a chunk's key and text alone, so a
re-sync versions only the chunks that changed (``node.memory.files.sync``).

A section longer than ``max_chars`` is split by paragraphs with content-defined
boundaries (a paragraph ends a part when its own hash says so, or when the part
is full), so an edit moves part boundaries only up to the next paragraph whose
hash ends a part; a part after the
first is keyed by its first line. A paragraph longer than a part is cut
between lines, and a line longer than a part in pieces. :func:`chunk_markdown`
is seed 001's chunker (fixed windows with overlap) for the MEMORY.md seed
migration.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

CHUNK_TOKENS = 400
OVERLAP_TOKENS = 80
CHARS_PER_TOKEN = 4
"""Token counts are approximated as characters / 4, as the seed's markdown chunker does."""
MAX_CHUNK_CHARS = CHUNK_TOKENS * CHARS_PER_TOKEN  # seed 001's 400 tokens: about two MiniLM windows
MAX_LINE_CHARS = 2_000  # a longer line (minified code, a data blob) keeps only its first 2,000 chars
MIN_WORD_CHARS = 3  # a chunk with fewer word characters (a lone "}" or "pass") is not worth a memory
BOUNDARY_EVERY = 3  # content-defined part boundaries: about one paragraph in three ends a part
KEY_LINE_CHARS = 80
SMALL_SECTION_CHARS = 240  # adjacent sections shorter than this share one chunk


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int
    key: str = ""  # stable within its file: heading path / definition (+ " #n" occurrence, " ¶ first line")
    label: str = ""  # what a reader is shown before the text: "Files › What is skipped", "def sync"


# --- seed 001's line windows (the MEMORY.md seed migration) --------------------------------------
def _split_long(line: str, limit: int) -> list[str]:
    return [line[i : i + limit] for i in range(0, len(line), limit)] or [""]


def chunk_markdown(text: str, tokens: int = CHUNK_TOKENS, overlap: int = OVERLAP_TOKENS,
                   first_line: int = 1) -> list[Chunk]:
    """Line-aligned chunks of at most ``tokens × 4`` chars, each starting with the last
    ``overlap × 4`` chars' worth of whole lines of the previous chunk.

    Lines longer than a chunk are cut into chunk-sized pieces. Blank-only chunks are dropped.
    ``first_line``: the number of ``text``'s first line in its file.
    """
    max_chars = max(1, tokens * CHARS_PER_TOKEN)
    overlap_chars = max(0, overlap * CHARS_PER_TOKEN)
    pieces: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=first_line):
        pieces += [(part, number) for part in _split_long(line, max_chars)]
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []
    size = 0

    def flush() -> None:
        body = "\n".join(part for part, _ in current)
        if body.strip():
            chunks.append(Chunk(body, current[0][1], current[-1][1]))

    for part, number in pieces:
        cost = len(part) + 1
        if current and size + cost > max_chars:
            flush()
            kept: list[tuple[str, int]] = []
            kept_size = 0
            for previous in reversed(current):
                if kept_size >= overlap_chars or kept_size + len(previous[0]) + 1 > max_chars - cost:
                    break
                kept.insert(0, previous)
                kept_size += len(previous[0]) + 1
            current, size = kept, kept_size
        current.append((part, number))
        size += cost
    if current:
        flush()
    return chunks


# --- text as read from a file ------------------------------------------------------------------
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Lines:
    """A file's lines as chunkers see them: numbered as an editor numbers them (``\\n`` ends a
    line, a trailing ``\\r`` is dropped), control characters removed, each line bounded."""

    lines: tuple[str, ...]
    long_lines: int  # lines cut at MAX_LINE_CHARS

    @classmethod
    def of(cls, text: str) -> Lines:
        cleaned: list[str] = []
        long_lines = 0
        for raw in text.split("\n"):
            line = _CONTROL.sub("", raw.removesuffix("\r"))
            if len(line) > MAX_LINE_CHARS:
                line, long_lines = line[:MAX_LINE_CHARS], long_lines + 1
            cleaned.append(line)
        if cleaned and cleaned[-1] == "":
            cleaned.pop()  # the newline ending the last line opens no line of its own
        return cls(tuple(cleaned), long_lines)


@dataclass(frozen=True)
class Section:
    """A run of lines ``[start, end)`` (0-based) and its structural name."""

    start: int
    end: int
    key: str
    label: str


def _first_line(lines: Sequence[str]) -> str:
    for line in lines:
        if line.strip():
            return " ".join(line.split())[:KEY_LINE_CHARS]
    return ""


def _has_words(text: str) -> bool:
    return sum(1 for character in text if character.isalnum()) >= MIN_WORD_CHARS


def _paragraphs(start: int, end: int, lines: Sequence[str]) -> list[tuple[int, int]]:
    """``[start, end)`` split after each blank line (blank lines stay with the paragraph above)."""
    spans: list[tuple[int, int]] = []
    begin = start
    for index in range(start, end):
        if not lines[index].strip() and index + 1 < end and lines[index + 1].strip():
            spans.append((begin, index + 1))
            begin = index + 1
    spans.append((begin, end))
    return spans


def _ends_part(lines: Sequence[str], span: tuple[int, int]) -> bool:
    text = "\n".join(lines[span[0]:span[1]]).strip()
    return zlib.crc32(text.encode("utf-8", "replace")) % BOUNDARY_EVERY == 0


def _parts(section: Section, lines: Sequence[str], max_chars: int) -> list[Chunk]:
    """One section as chunks of at most ``max_chars`` (see the module docstring)."""
    body = "\n".join(lines[section.start:section.end])
    if len(body) <= max_chars:
        return [Chunk(body, section.start + 1, section.end, section.key, section.label)]
    pieces: list[tuple[int, int]] = []  # paragraphs, a too-long one as its line windows
    for begin, end in _paragraphs(section.start, section.end, lines):
        if sum(len(line) + 1 for line in lines[begin:end]) <= max_chars:
            pieces.append((begin, end))
            continue
        run_start, run_size = begin, 0  # runs of whole lines; a line longer than a part stands alone
        for index in range(begin, end):
            cost = len(lines[index]) + 1
            if index > run_start and run_size + cost > max_chars:
                pieces.append((run_start, index))
                run_start, run_size = index, 0
            run_size += cost
        pieces.append((run_start, end))
    parts: list[list[tuple[int, int]]] = [[]]
    size = 0
    for piece in pieces:
        cost = sum(len(line) + 1 for line in lines[piece[0]:piece[1]])
        if parts[-1] and size + cost > max_chars:
            parts.append([])
            size = 0
        parts[-1].append(piece)
        size += cost
        if _ends_part(lines, piece):
            parts.append([])
            size = 0
    chunks: list[Chunk] = []
    for index, part in enumerate(p for p in parts if p):
        start, end = part[0][0], part[-1][1]
        text = "\n".join(lines[start:end])
        if len(text) > max_chars:  # one line longer than a part: its pieces, same lines
            for number, cut in enumerate(_split_long(text, max_chars)):
                suffix = f" ¶ {_first_line(lines[start:end])} …{number}"
                chunks.append(Chunk(cut, start + 1, end, section.key + suffix, section.label))
            continue
        key = section.key if index == 0 else f"{section.key} ¶ {_first_line(lines[start:end])}"
        chunks.append(Chunk(text, start + 1, end, key, section.label))
    return chunks


def _size(section: Section, lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines[section.start:section.end])


def _merge_small(sections: Sequence[Section], lines: Sequence[str], max_chars: int) -> list[Section]:
    """Runs of adjacent small sections (a few constants, one-line headings) as one section named
    by its first: one memory for ``const A``, ``const B``, ``const C`` rather than three slivers."""
    merged: list[Section] = []
    run: list[Section] = []

    def close() -> None:
        if run:
            label = run[0].label + (" …" if len(run) > 1 and run[0].label else "")
            merged.append(Section(run[0].start, run[-1].end, run[0].key, label))
            run.clear()

    for section in sections:
        size = _size(section, lines)
        if size >= SMALL_SECTION_CHARS:
            close()
            merged.append(section)
            continue
        if run and _size(Section(run[0].start, section.end, "", ""), lines) > max_chars // 2:
            close()
        run.append(section)
    close()
    return merged


def sections_to_chunks(sections: Sequence[Section], lines: Sequence[str], max_chars: int,
                       merge_small: bool = False) -> list[Chunk]:
    """Sections cut to size, tiny ones dropped, repeated keys numbered (`` #2``) in file order;
    ``merge_small``: small neighbours share a chunk (definition lines found by a pattern)."""
    kept = [s for s in sections if s.end > s.start]
    if merge_small:
        kept = _merge_small(kept, lines, max_chars)
    chunks = [chunk for section in kept for chunk in _parts(section, lines, max_chars) if _has_words(chunk.text)]
    seen: dict[str, int] = {}
    numbered: list[Chunk] = []
    for chunk in chunks:
        seen[chunk.key] = seen.get(chunk.key, 0) + 1
        count = seen[chunk.key]
        # The label too: two identical sections of one file are still two memories (dedup is by text).
        numbered.append(chunk if count == 1 else replace(
            chunk, key=f"{chunk.key} #{count}", label=f"{chunk.label} #{count}".strip()))
    return numbered


# --- Markdown -----------------------------------------------------------------------------------
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_sections(lines: Sequence[str]) -> list[Section]:
    """One section per ATX heading (up to the next heading of any level), keyed by the heading
    path (``Files › What is skipped``); text before the first heading is the preamble; front
    matter (``---`` … ``---`` at the top) is its own section. Headings inside code fences do not count."""
    sections: list[Section] = []
    begin, key, label = 0, "(preamble)", ""
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() in ("---", "..."):
                sections.append(Section(0, index + 1, "(front matter)", "front matter"))
                begin = index + 1
                break
    path: list[tuple[int, str]] = []
    fence: str | None = None
    for index in range(begin, len(lines)):
        line = lines[index]
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _HEADING.match(line)
        if heading is None:
            continue
        sections.append(Section(begin, index, key, label))
        level = len(heading.group(1))
        title = " ".join(heading.group(2).split()) or "(untitled)"
        path = [(depth, name) for depth, name in path if depth < level] + [(level, title)]
        begin, key = index, " › ".join(name for _, name in path)
        label = key
    sections.append(Section(begin, len(lines), key, label))
    # A heading directly followed by a sub-heading carries no text of its own.
    return [s for s in sections if s.key == "(preamble)" or any(
        line.strip() for line in lines[s.start + 1:s.end]) or s.key == "(front matter)"]


# --- plain text ---------------------------------------------------------------------------------
def text_sections(lines: Sequence[str]) -> list[Section]:
    """The whole file as one section (cut by paragraphs when long)."""
    return [Section(0, len(lines), "(text)", "")]
