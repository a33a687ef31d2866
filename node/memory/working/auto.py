"""Auto-scratch from hormonal spikes (seed 001: "belt AND suspenders").

During each consolidation cycle, a hormone above 0.7 writes an ``[AUTO]`` note,
so high-valence moments are kept even when the agent forgot to note them.
"""

from __future__ import annotations

from node.memory.working.dream import shorten

# What each spike means, in words that are not themselves hormone triggers
# (an auto note must not spike the hormone it reports).
SPIKE_MEANING = {
    "dopamine": "achievement/breakthrough detected",
    "cortisol": "friction or stress detected",
    "oxytocin": "social bonding moment detected",
}


def auto_note_text(hormone: str, level: float, context: str | None) -> str:
    """``[AUTO] Hormonal event: dopamine spike (achievement/breakthrough detected). …``"""
    text = f"[AUTO] Hormonal event: {hormone} spike ({SPIKE_MEANING[hormone]}, level {level:.2f})."
    if context:
        text += f" Latest related memory: {shorten(context, 200)}"
    return text
