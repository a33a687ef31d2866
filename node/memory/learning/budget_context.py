"""``memory context --query Q --budget-tokens N``: retrieval feeding the budgeted assembler.

Search gives relevance; each hit's value is its score times its confidence
(so inherited or doubted knowledge yields its place to what the node
believes); :func:`node.memory.learning.context_budget.assemble` does the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.crystals import SemanticType
from node.memory.learning.context_budget import AssembledContext, BlockKind, ContextItem, assemble
from node.memory.search import MemoryInputError, SearchRequest, origin_of

if TYPE_CHECKING:
    from node.memory.learning.learning import Learning
    from node.memory.owner import MemoryOwner as Memory

MAX_BUDGET_TOKENS = 1_000_000
CANDIDATES = 40

BLOCK_OF = {
    SemanticType.WARNING: BlockKind.WARNINGS,
    SemanticType.EPISODE: BlockKind.EPISODES,
    SemanticType.SKILL: BlockKind.SKILLS,
    SemanticType.TASK_PATTERN: BlockKind.SKILLS,
}


def budget_context(
    memory: Memory,
    learning: Learning,
    query: str,
    budget_tokens: int,
    working_memory: str | None = None,
    candidates: int = CANDIDATES,
    sources: tuple[str, ...] = (),
) -> AssembledContext:
    """Typed blocks for ``query`` within ``budget_tokens`` (see :mod:`node.memory.learning.context_budget`).

    ``sources``: only memories of these sources (``SearchRequest.sources``; empty: all). Each
    item carries its hit's ``origin``, so an agent can cite where a line of its context came from.
    """
    if not 0 <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise MemoryInputError(f"budget_tokens must lie in [0, {MAX_BUDGET_TOKENS}]")
    hits = memory.search(SearchRequest(query, k=candidates, record_access=False, sources=tuple(sources)))
    confidence = learning.confidences([hit.crystal for hit in hits])
    items = [
        ContextItem(
            hit.crystal.id,
            BLOCK_OF.get(hit.crystal.semantic_type, BlockKind.FACTS),
            hit.crystal.text,
            hit.score * confidence[hit.crystal.id],
            origin_of(hit.crystal, hit.turn),
        )
        for hit in hits
    ]
    if working_memory and working_memory.strip():
        items.append(ContextItem("working-memory", BlockKind.WORKING_MEMORY, working_memory.strip(), 1.0))
    return assemble(items, budget_tokens)
