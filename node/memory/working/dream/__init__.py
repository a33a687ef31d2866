"""The dream's synthesisers (seed 001): plain inputs in, MEMORY.md sections out.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.working.dream.extractive import ExtractiveSynthesiser as ExtractiveSynthesiser
    from node.memory.working.dream.extractive import first_dream_since as first_dream_since
    from node.memory.working.dream.inputs import CrystalView as CrystalView
    from node.memory.working.dream.inputs import HormoneLevels as HormoneLevels
    from node.memory.working.dream.inputs import NicheData as NicheData
    from node.memory.working.dream.inputs import Synthesiser as Synthesiser
    from node.memory.working.dream.inputs import SynthesisInput as SynthesisInput
    from node.memory.working.dream.llm import LlmSynthesiser as LlmSynthesiser
    from node.memory.working.dream.sections import shorten as shorten
    from node.memory.working.dream.skills import LIVE as LIVE
    from node.memory.working.dream.skills import TASK_TYPES as TASK_TYPES
    from node.memory.working.dream.skills import detect_emerging as detect_emerging

__getattr__ = face(__name__)
