"""How memory changes by itself (seed 000): importance, consolidation, hormones.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.dynamics.consolidation import ConsolidationInput as ConsolidationInput
    from node.memory.dynamics.consolidation import plan_consolidation as plan_consolidation
    from node.memory.dynamics.hormones import HormonalEvent as HormonalEvent
    from node.memory.dynamics.hormones import HormonalStateManager as HormonalStateManager
    from node.memory.dynamics.hormones import compute_crystal_influence as compute_crystal_influence
    from node.memory.dynamics.hormones import emotional_valence as emotional_valence

__getattr__ = face(__name__)
