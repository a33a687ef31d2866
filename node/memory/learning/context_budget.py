"""Context under a token budget (seed 003, "Context engineering").

Assembles what an agent should read before its next step into typed blocks —
working memory, warnings, facts, episodes, skills — that together fit a token
budget:

1. near-duplicates are collapsed (the more valuable copy stays);
2. blocks are filled in priority order (working memory, warnings, facts,
   episodes, skills), each block's items by value, as long as they fit;
3. the kept blocks and the items inside each block are laid out along the
   U-curve: the most valuable at the start and the end, the least in the middle;
4. everything left out is reported with the reason.

Pure: items in, an assembled context out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")


class BlockKind(StrEnum):
    WORKING_MEMORY = "working_memory"
    WARNINGS = "warnings"
    FACTS = "facts"
    EPISODES = "episodes"
    SKILLS = "skills"


ALLOCATION_ORDER = (
    BlockKind.WORKING_MEMORY,
    BlockKind.WARNINGS,
    BlockKind.FACTS,
    BlockKind.EPISODES,
    BlockKind.SKILLS,
)
"""Which block gets budget first (issue 16's order)."""

LAYOUT_RANK = (
    BlockKind.WARNINGS,
    BlockKind.WORKING_MEMORY,
    BlockKind.FACTS,
    BlockKind.EPISODES,
    BlockKind.SKILLS,
)
"""Block value for the layout: warnings open the context, working memory closes it."""

NEAR_DUPLICATE_JACCARD = 0.8
EVICTED_OVER_BUDGET = "over_budget"
EVICTED_DUPLICATE = "near_duplicate_of:"
_WORD = re.compile(r"\w+", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """Seed 003: ``fn estimate_tokens(text: &str) -> usize { text.len() / 4 }``.

    Rounded up here, so a non-empty text never costs zero tokens.
    """
    return math.ceil(len(text.encode("utf-8")) / 4)


def u_curve(ranked: Sequence[T]) -> list[T]:
    """Lay out items given best-first so the best sit at both ends and the worst in the middle.

    Seed 003 ("Lost in the middle: the U-curve problem", Liu et al. 2023):
    "place the most important information at the boundaries." Ranks 1, 3, 5, …
    fill from the start, ranks 2, 4, 6, … from the end.
    """
    head = list(ranked[0::2])
    tail = list(ranked[1::2])
    return head + tail[::-1]


@dataclass(frozen=True)
class ContextItem:
    id: str
    kind: BlockKind
    text: str
    value: float
    # Where the memory came from (node.memory.search.origin); reported, never rendered into the text.
    origin: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass(frozen=True)
class Eviction:
    id: str
    kind: BlockKind
    reason: str
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind.value, "reason": self.reason, "tokens": self.tokens}


@dataclass
class AssembledContext:
    budget_tokens: int
    blocks: list[tuple[BlockKind, list[ContextItem]]] = field(default_factory=list)
    evicted: list[Eviction] = field(default_factory=list)
    used_tokens: int = 0

    def render(self) -> str:
        return "\n\n".join(_render_block(kind, items) for kind, items in self.blocks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "blocks": [
                {
                    "kind": kind.value,
                    "items": [{"id": i.id, "text": i.text, "value": round(i.value, 6)}
                              | ({"origin": i.origin} if i.origin is not None else {}) for i in items],
                }
                for kind, items in self.blocks
            ],
            "evicted": [e.to_dict() for e in self.evicted],
            "text": self.render(),
        }


def _render_block(kind: BlockKind, items: Sequence[ContextItem]) -> str:
    body = "\n".join(f"- {item.text}" if kind is not BlockKind.WORKING_MEMORY else item.text for item in items)
    return f"<{kind.value}>\n{body}\n</{kind.value}>"


def _block_overhead(kind: BlockKind) -> int:
    return estimate_tokens(_render_block(kind, []))


def _item_cost(kind: BlockKind, item: ContextItem) -> int:
    prefix = "" if kind is BlockKind.WORKING_MEMORY else "- "
    return estimate_tokens(prefix + item.text + "\n")


def _words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in _WORD.findall(text))


def jaccard(a: str, b: str) -> float:
    words_a, words_b = _words(a), _words(b)
    if not words_a and not words_b:
        return 1.0
    return len(words_a & words_b) / len(words_a | words_b)


def collapse_near_duplicates(
    items: Sequence[ContextItem], threshold: float = NEAR_DUPLICATE_JACCARD
) -> tuple[list[ContextItem], list[Eviction]]:
    """Keep one item of each group whose word sets overlap at Jaccard ≥ ``threshold``.

    Items are considered in allocation order (block priority, then value), so
    the copy kept is the one from the higher block with the higher value.
    """
    kept: list[ContextItem] = []
    evicted: list[Eviction] = []
    for item in _allocation_sorted(items):
        twin = next((k for k in kept if jaccard(k.text, item.text) >= threshold), None)
        if twin is None:
            kept.append(item)
        else:
            evicted.append(Eviction(item.id, item.kind, EVICTED_DUPLICATE + twin.id, item.tokens))
    return kept, evicted


def _allocation_sorted(items: Sequence[ContextItem]) -> list[ContextItem]:
    rank = {kind: index for index, kind in enumerate(ALLOCATION_ORDER)}
    return sorted(items, key=lambda i: (rank[i.kind], -i.value, i.id))


def assemble(items: Sequence[ContextItem], budget_tokens: int) -> AssembledContext:
    """Fill the budget by block priority and value, then lay blocks and items out on the U-curve."""
    if budget_tokens < 0:
        raise ValueError("the budget cannot be negative")
    result = AssembledContext(budget_tokens)
    kept, result.evicted = collapse_near_duplicates(items)
    chosen: dict[BlockKind, list[ContextItem]] = {}
    used = 0
    for item in _allocation_sorted(kept):
        cost = _item_cost(item.kind, item)
        if item.kind not in chosen:
            cost += _block_overhead(item.kind)
        if used + cost > budget_tokens:
            result.evicted.append(Eviction(item.id, item.kind, EVICTED_OVER_BUDGET, item.tokens))
            continue
        used += cost
        chosen.setdefault(item.kind, []).append(item)
    result.used_tokens = used
    for kind in u_curve([k for k in LAYOUT_RANK if k in chosen]):
        ranked = sorted(chosen[kind], key=lambda i: (-i.value, i.id))
        result.blocks.append((kind, u_curve(ranked)))
    return result
