"""Working memory for a prompt: MEMORY.md plus pending notes, sized to the model's window.

``working_memory_block`` is pure so that other context builders (the typed
blocks under a token budget) can embed it.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.memory.working.scratch import ScratchNote
from node.memory.working.state import (
    DEFAULT_WINDOW_TOKENS,
    TRUNCATION_NOTE,
    bootstrap_budget_chars,
    truncate_to_budget,
)

NOTES_HEADING = "## Unsynthesized Notes (pending dream consolidation)"
EMPTY_STATE = "# Working Memory State\n\n_No dream yet: run `crystalmesh memory dream`._"


def select_notes(notes: Sequence[ScratchNote], budget_chars: int) -> tuple[list[ScratchNote], bool]:
    """Notes that fit ``budget_chars``: the most important (then newest) first, shown in
    time order; the flag says whether any were left out."""
    ranked = sorted(notes, key=lambda n: (-n.importance, -n.at_ms, n.id))
    kept: list[ScratchNote] = []
    used = len(TRUNCATION_NOTE) + 2
    for note in ranked:
        cost = len(note.seed_line()) + 1
        if used + cost > budget_chars:
            continue
        kept.append(note)
        used += cost
    kept.sort(key=lambda n: (n.at_ms, n.id))
    return kept, len(kept) < len(notes)


def working_memory_block(state_text: str, notes: Sequence[ScratchNote],
                         window_tokens: int | None = None) -> str:
    """The seed's bootstrap injection: MEMORY.md as committed state, the scratch as
    "Unsynthesized Notes (pending dream consolidation)".

    Budget (seed's adaptive table, by context window): 200K+ → 8,000 chars, 128K →
    6,000, 64K → 4,000, 32K → 3,200. MEMORY.md gets the budget; over it, it is cut
    with "[Full working memory available via memory_search]". Pending notes get
    the same budget again (ours: the seed sizes only MEMORY.md), keeping the most
    important ones.
    """
    budget = bootstrap_budget_chars(DEFAULT_WINDOW_TOKENS if window_tokens is None else window_tokens)
    parts = [truncate_to_budget(state_text.strip() or EMPTY_STATE, budget)]
    if notes:
        kept, dropped = select_notes(notes, budget)
        lines = "\n".join(note.seed_line() for note in kept)
        parts.append(f"{NOTES_HEADING}\n\n{lines}" + (f"\n\n{TRUNCATION_NOTE}" if dropped else ""))
    return "\n\n".join(parts) + "\n"
