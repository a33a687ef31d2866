"""Seed crystal migration: a hand-written MEMORY.md survives the switch to working memory.

Seed 001: on first activation, if migration has not run (flag in the meta
table), read the existing MEMORY.md, back it up to ``MEMORY.md.seed-backup``,
chunk it (400 tokens, 80 overlap), insert the chunks as crystals with
``importance_score`` 0.75 and lifecycle ``consolidated``, and mark the
migration complete. The first dream afterwards appends below the hand-written
text instead of rewriting it (see ``state.render_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

CHUNK_TOKENS = 400
OVERLAP_TOKENS = 80
CHARS_PER_TOKEN = 4
"""Token counts are approximated as characters / 4, as the seed's markdown chunker does."""
SEED_IMPORTANCE = 0.75


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int


def _split_long(line: str, limit: int) -> list[str]:
    return [line[i : i + limit] for i in range(0, len(line), limit)] or [""]


def chunk_markdown(text: str, tokens: int = CHUNK_TOKENS, overlap: int = OVERLAP_TOKENS) -> list[Chunk]:
    """Line-aligned chunks of at most ``tokens × 4`` chars, each starting with the last
    ``overlap × 4`` chars' worth of whole lines of the previous chunk.

    Lines longer than a chunk are cut into chunk-sized pieces. Blank-only chunks are dropped.
    """
    max_chars = max(1, tokens * CHARS_PER_TOKEN)
    overlap_chars = max(0, overlap * CHARS_PER_TOKEN)
    pieces: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
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
