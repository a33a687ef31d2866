"""Working memory's operations as the doors answer them: each written once, as a function of one
``WorkingMemory`` returning the JSON answer.

Two executors call these and nothing else: the node's ``WorkingMemoryService`` (on a worker
thread, each store access hopping onto the database's single writer) and the CLI without a
node (``node.cli.local.LocalNode``, in its own process). So ``memory note`` answers with the
same keys, the namespace included, whether a node runs or not (issue 37: it did not).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from node.memory.facade import MemoryInputError
from node.memory.requests import consolidate_at
from node.memory.working.backend import note_kind
from node.memory.working.working import WorkingMemory

log = logging.getLogger(__name__)
PROPOSAL_STATUSES = ("pending", "adopted", "dismissed", "all")


def memory_note(working: WorkingMemory, text: str, importance: float, semantic_type: str | None = None,
         scope: str | None = None, lifespan: str | None = None) -> dict[str, Any]:
    """``working_memory_note``: durable in the scratch at once, then a searchable crystal."""
    result = working.note(text, importance, note_kind(semantic_type, scope, lifespan))
    return result.to_dict() | {"namespace": working.namespace}


def memory_dream(working: WorkingMemory, force: bool = True) -> dict[str, Any]:
    """One dream (``force``: even below ``min_chunks_for_dream``)."""
    return working.dream(force=force).to_dict() | {"namespace": working.namespace}


def memory_context(working: WorkingMemory, window_tokens: int) -> dict[str, Any]:
    """MEMORY.md and the pending notes, sized for a model's context window."""
    return {"namespace": working.namespace, "window": window_tokens, "context": working.context(window_tokens)}


def working_state(working: WorkingMemory) -> dict[str, Any]:
    """MEMORY.md as written and the notes not yet folded into it (what MCP serves as resources)."""
    working.activate()
    return {"namespace": working.namespace, "memory_md": working.read_state(),
            "notes": [pending.to_dict() for pending in working.pending_notes()]}


def directive_proposals(working: WorkingMemory, status: str = "pending") -> dict[str, Any]:
    """Directives a dream proposed with ``status`` (pending, adopted, dismissed or all)."""
    if status not in PROPOSAL_STATUSES:
        raise MemoryInputError(f"status must be one of: {', '.join(PROPOSAL_STATUSES)}")
    return {"namespace": working.namespace, "proposals": working.proposals(None if status == "all" else status)}


def decide_directive(working: WorkingMemory, proposal_id: str, adopt: bool) -> dict[str, Any]:
    """The user's answer to one proposal: adopted as a directive, or dismissed."""
    return working.decide_proposal(proposal_id, adopt)


def crystallize_skill(working: WorkingMemory, crystal_id: str, text: str | None, category: str | None,
                tags: Sequence[str]) -> dict[str, Any]:
    """An emerging skill (a task pattern) as a skill crystal."""
    return working.backend.crystallize(crystal_id, text, category, tuple(tags)).to_dict()


def memory_consolidate(working: WorkingMemory, at: str | None = None, purge: bool = False,
                dry_run: bool = False) -> dict[str, Any]:
    """One consolidation cycle on the store (seed 000), then seed 001's auto-scratch in this
    (the default) namespace: a note per hormone that spiked. A dry run writes neither."""
    report = working.backend.call(lambda: consolidate_at(working.backend.memory, at, purge=purge,
                                                         dry_run=dry_run))
    if not dry_run:
        auto_scratch_logged(working)
    return asdict(report)


def auto_scratch_logged(working: WorkingMemory) -> list[dict[str, Any]]:
    """An ``[AUTO]`` note per hormone above 0.7; a failure is logged, never its caller's."""
    try:
        notes = working.auto_scratch()
    except Exception:
        log.exception("auto-scratch failed")
        return []
    if notes:
        log.info("auto-scratch: %d hormonal spike note(s)", len(notes))
    return [written.to_dict() for written in notes]
