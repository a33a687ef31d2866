"""The bootstrap context of one namespace read from its files alone: no store, no embedder, no index.

A host's session-start hook must answer within a few hundred milliseconds,
running node or not; opening the store would load the embedder and the vector
index. What ``WorkingMemory.context`` shows is already on disk: MEMORY.md and
the scratch WAL, read here under the same ``scratch.lock`` a node takes, so a
concurrent note or dream is seen whole or not at all. A dream committed but not
yet applied (its journal still on disk) is shown as it will be once applied: its
MEMORY.md, without the notes it consumed. Nothing is written.

What this read does not do, on purpose: the once-per-namespace seed migration
(``WorkingMemory.activate``) indexes a hand-written MEMORY.md into crystals; the
text shown is the same either way, and the next ``memory context`` or dream
through a node does it.
"""

from __future__ import annotations

from pathlib import Path

from node.memory.working.context import working_memory_block
from node.memory.working.durable import UnsafeFile, file_lock, read_bytes
from node.memory.working.journal import read_journal
from node.memory.working.scratch import MAX_SCRATCH_BYTES, ScratchNote, parse
from node.memory.working.state import BOOTSTRAP_BUDGETS, DEFAULT_WINDOW_TOKENS

MAX_STATE_BYTES = 1024 * 1024  # as WorkingMemory: a MEMORY.md larger than any dream writes is refused
# Windows to fall back to, largest first, when a host caps what it accepts (their budgets shrink).
_WINDOWS = (*tuple(window for window, _ in BOOTSTRAP_BUDGETS), 32000)


def _journal_view(directory: Path) -> tuple[str, frozenset[str]] | None:
    """(MEMORY.md, consumed note ids) of a committed, unapplied dream; None without a sound one."""
    try:
        journal = read_journal(directory / "dream.journal", 4 * MAX_STATE_BYTES)
    except (ValueError, KeyError, TypeError, AttributeError, UnsafeFile, RecursionError):
        return None
    return None if journal is None else (journal["state"], frozenset(journal["consumed"]))


def read_working_files(data_dir: Path, namespace: str) -> tuple[str, list[ScratchNote]]:
    """MEMORY.md's text and the pending scratch notes of ``namespace``, as a node would show them.

    ``namespace`` must already be a valid namespace name (``validate_namespace``): it
    names a directory.
    """
    directory = Path(data_dir) / "memory" / namespace
    if not directory.is_dir() or directory.is_symlink():
        return "", []
    with file_lock(directory / "scratch.lock"):
        state_bytes = read_bytes(directory / "MEMORY.md", MAX_STATE_BYTES)
        notes = parse(read_bytes(directory / "scratch.md", MAX_SCRATCH_BYTES) or b"").notes
        pending = _journal_view(directory)
    state = state_bytes.decode("utf-8", errors="replace") if state_bytes else ""
    if pending is not None:
        state, consumed = pending
        notes = [note for note in notes if note.id not in consumed]
    return state, notes


def bootstrap_context(data_dir: Path, namespace: str, window_tokens: int = DEFAULT_WINDOW_TOKENS,
                      max_chars: int | None = None) -> str:
    """Seed 001's session-start injection (MEMORY.md + pending notes, within the window's budget)
    from the files; with ``max_chars`` (a host's cap on injected text), the largest budget that fits,
    and at worst a hard cut."""
    state, notes = read_working_files(data_dir, namespace)
    text = working_memory_block(state, notes, window_tokens)
    if max_chars is None or len(text) <= max_chars:
        return text
    for window in _WINDOWS:
        if window < window_tokens:
            text = working_memory_block(state, notes, window)
            if len(text) <= max_chars:
                return text
    return text[: max(0, max_chars - 1)] + "…"
