"""Memory that learns (seed 003/004): facts, confidence, energy tiers, testaments, context under a budget.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.learning.budget_context import budget_context as budget_context
    from node.memory.learning.dreaming import InsightReport as InsightReport
    from node.memory.learning.dreaming import Material as Material
    from node.memory.learning.dreaming import ProposalNotFound as ProposalNotFound
    from node.memory.learning.dreaming import apply_findings as apply_findings
    from node.memory.learning.dreaming import new_material as new_material
    from node.memory.learning.energy import Tier as Tier
    from node.memory.learning.insights import Candidate as Candidate
    from node.memory.learning.insights import Classification as Classification
    from node.memory.learning.insights import classification as classification
    from node.memory.learning.insights import extract as extract
    from node.memory.learning.knowledge import Provenance as Provenance
    from node.memory.learning.learning import Learning as Learning
    from node.memory.learning.testament_io import TestamentRefused as TestamentRefused
    from node.memory.learning.testament_io import export_testament as export_testament
    from node.memory.learning.testament_io import import_testament as import_testament
    from node.memory.learning.testament_io import read_testament_file as read_testament_file
    from node.memory.learning.testament_io import write_private as write_private
    from node.memory.learning.tiers import end_session as end_session
    from node.memory.learning.tiers import run_tiers as run_tiers
    from node.memory.learning.tiers import tier_status as tier_status

__getattr__ = face(__name__)
