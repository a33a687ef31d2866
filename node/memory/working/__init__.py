"""Working memory (seed 001): the scratch WAL, the MEMORY.md state vector and the dream cycle.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.working.backend import MemoryBackend as MemoryBackend
    from node.memory.working.backend import NoteKind as NoteKind
    from node.memory.working.backend import note_kind as note_kind
    from node.memory.working.bootstrap import bootstrap_context as bootstrap_context
    from node.memory.working.build import working_memory_for as working_memory_for
    from node.memory.working.dream.inputs import NicheData as NicheData
    from node.memory.working.scratch import DEFAULT_IMPORTANCE as DEFAULT_IMPORTANCE
    from node.memory.working.service import WorkingMemoryService as WorkingMemoryService
    from node.memory.working.state import DEFAULT_WINDOW_TOKENS as DEFAULT_WINDOW_TOKENS
    from node.memory.working.working import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE
    from node.memory.working.working import WorkingMemory as WorkingMemory

__getattr__ = face(__name__)
