"""The default synthesiser: deterministic, offline, extractive.

``New_State = f(Old_State + Scratch + New_Crystals + Insights)`` without a model:
it ranks crystals and notes by importance, the hormonal section weights and
access patterns, copies their text into the seed's 7 sections, carries the
previous state's lines forward where a section is calm, and compresses fading
topics into Crystal Pointers whose keywords are checked against the node's own
search. Same input, same output.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.memory.learning import Candidate
from node.memory.working.dream import sections
from node.memory.working.dream.inputs import (
    Classified,
    CrystalView,
    Pointer,
    SearchFn,
    Synthesis,
    SynthesisInput,
    describe_mood,
    section_weight,
)
from node.memory.working.dream.pointers import carried_pointers, fading_candidates, make_pointer
from node.memory.working.dream.skills import emerging_line
from node.memory.working.scratch import utc_now_iso
from node.memory.working.state import (
    POINTER_GUIDANCE,
    SKILLS_GUIDANCE,
    parse_state,
    pointer_lines,
    preamble_of,
    render_state,
)

MAX_GENERATED_POINTERS = 12
"""Well under the collapse guard's 20: room for an LLM pass or a busy week."""
FADING_AFTER_MS = 6 * 3_600_000
"""Before a first dream, a crystal untouched for 6 h belongs to an earlier session."""
POINTER_CANDIDATES = 3 * MAX_GENERATED_POINTERS


def first_dream_since(last_dream_ms: int | None, now_ms: int) -> int:
    """Where this dream's new material starts: the last dream, or 6 h ago before any dream."""
    return last_dream_ms if last_dream_ms is not None else now_ms - FADING_AFTER_MS


def _delta(data: SynthesisInput) -> list[CrystalView]:
    """This dream's new material: scratch notes and crystals created since the last dream."""
    note_crystals = set(data.note_crystal_ids.values())
    views = [sections.note_view(note, data.note_crystal_ids.get(note.id)) for note in data.notes]
    # A dream's own insights restate this material (they reach the state through The Bond and
    # later dreams once they have lasted), so they are not new material twice.
    views += [c for c in data.crystals
              if c.id in data.new_crystal_ids and c.id not in note_crystals
              and c.semantic_type not in ("skill",) and c.origin != "dream"]
    return views


def _key(pointer: Pointer) -> str:
    return "keywords:" + " ".join(sorted(pointer.keywords.lower().split()))


def _pointers(data: SynthesisInput, shown: set[str], search: SearchFn) -> list[Pointer]:
    candidates = fading_candidates(data.crystals, shown, data.now_ms,
                                   data.now_ms - first_dream_since(data.last_dream_ms, data.now_ms))
    made: list[Pointer] = []
    seen: set[str] = set()  # topics and keyword sets already pointed to
    for crystal in candidates[:POINTER_CANDIDATES]:
        if len(made) >= MAX_GENERATED_POINTERS:
            break
        pointer = make_pointer(crystal, data.crystals, search)
        if pointer is not None and not {pointer.topic.lower(), _key(pointer)} & seen:
            seen.update({pointer.topic.lower(), _key(pointer)})
            made.append(pointer)
    for pointer in carried_pointers(pointer_lines(data.old_state), search):
        if len(made) >= MAX_GENERATED_POINTERS:
            break
        if not {pointer.topic.lower(), _key(pointer)} & seen:
            seen.update({pointer.topic.lower(), _key(pointer)})
            made.append(pointer)
    return made


class ExtractiveSynthesiser:
    name = "extractive"

    def classify(self, candidates: Sequence[Candidate]) -> Classified:
        """No model: the extraction rules' kinds stand; every insight is a mental model."""
        return Classified("rules")

    def synthesise(self, data: SynthesisInput, search: SearchFn) -> Synthesis:
        old = parse_state(data.old_state)
        mood = describe_mood(data.hormones)
        delta = _delta(data)
        recent = delta + [c for c in data.crystals if c.id not in data.new_crystal_ids
                          and c.semantic_type not in ("skill", "task_pattern")]
        bond_lines, bond_ids = sections.bond(recent, old.bullets("bond"), data.hormones,
                                             section_weight(data.hormones.oxytocin))
        active_lines, active_ids = sections.active_context(
            delta, old.bullets("active"), data.now_ms,
            section_weight(max(data.hormones.dopamine, data.hormones.cortisol)), bond_ids)
        skills = [c for c in data.crystals if c.semantic_type == "skill"]
        gap_lines, gap_ids = sections.curiosity_gaps(delta, skills, old.bullets("gaps"))
        emerging_ids = {skill.crystal_id for skill in data.emerging}
        shown = bond_ids | active_ids | gap_ids | emerging_ids
        pointers = _pointers(data, shown, search)
        body = {
            "phenotype": "\n".join(sections.phenotype(data.crystals, mood)),
            "bond": "\n".join(bond_lines),
            "niche": "\n".join(sections.niche(data.niche)),
            "active": "\n".join(active_lines),
            "pointers": "\n".join([POINTER_GUIDANCE, ""] + [p.line() for p in pointers])
            if pointers else "",
            "gaps": "\n".join(gap_lines),
            "skills": "\n".join([SKILLS_GUIDANCE, ""] + [emerging_line(s) for s in data.emerging])
            if data.emerging else "",
        }
        text = render_state(body, utc_now_iso(data.now_ms), mood, preamble_of(data.old_state)
                            if data.old_state.strip() else "")
        return Synthesis(text, self.name, pointers)
