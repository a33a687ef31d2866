"""MEMORY.md, the working-memory state vector (seed 001): schema, parsing, collapse guards, sizing.

Pure functions of strings and numbers; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TITLE = "# Working Memory State"
# The seed's 7 required sections, in order, with the headings it shows.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("phenotype", "## The Phenotype"),
    ("bond", "## The Bond (Oxytocin-Weighted)"),
    ("niche", "## The Niche"),
    ("active", "## Active Context (Dopamine/Cortisol-Weighted)"),
    ("pointers", "## Crystal Pointers (Deep Memory Awareness)"),
    ("gaps", "## Curiosity Gaps"),
    ("skills", "## Emerging Skills"),
)
SECTION_KEYS = tuple(key for key, _ in SECTIONS)
# Short names an LLM may use for the same heading ("## The Bond" without the hormone).
_HEADING_STEMS = {
    "phenotype": "the phenotype",
    "bond": "the bond",
    "niche": "the niche",
    "active": "active context",
    "pointers": "crystal pointers",
    "gaps": "curiosity gaps",
    "skills": "emerging skills",
}
POINTER_GUIDANCE = "_Use memory_search if user asks about these topics:_"
SKILLS_GUIDANCE = "_Patterns detected from repeated tasks. Pre-crystallization:_"
DREAM_MARKER = (
    "<!-- Dream-generated working memory follows. Subsequent dream cycles will\n"
    "     gradually integrate the above content. -->"
)
DREAM_SEPARATOR = "---\n\n## Dream-Generated\n\n" + DREAM_MARKER
"""Between a hand-written MEMORY.md (kept verbatim on top) and the dream's state."""
TRUNCATION_NOTE = "[Full working memory available via memory_search]"

# Collapse guards (seed: validateWorkingMemory()).
MATURE_STATE_CHARS = 2000
MASS_DROP_RATIO = 0.5
MAX_POINTERS = 20
MIN_SUBSTANCE_CHARS = 50

# Adaptive bootstrap sizing (seed): context window (tokens) -> MEMORY.md budget (chars).
BOOTSTRAP_BUDGETS: tuple[tuple[int, int], ...] = (
    (200_000, 8_000),
    (128_000, 6_000),
    (64_000, 4_000),
)
SMALLEST_BUDGET_CHARS = 3_200
DEFAULT_WINDOW_TOKENS = 200_000

_POINTER_LINE = re.compile(r"^\s*[-*]\s+Past:\s*(?P<topic>.+?)\s*(?:→|->)\s*search:\s*`(?P<keywords>[^`]+)`")


@dataclass
class ParsedState:
    """MEMORY.md split into what precedes the schema and each section's body."""

    preamble: str = ""
    header: str = ""
    sections: dict[str, str] = field(default_factory=dict)

    def bullets(self, key: str) -> list[str]:
        return [line.strip() for line in self.sections.get(key, "").splitlines()
                if line.strip().startswith(("- ", "* "))]


def _section_key(line: str) -> str | None:
    if not line.startswith("## "):
        return None
    heading = line[3:].strip().lower()
    for key, stem in _HEADING_STEMS.items():
        if heading.startswith(stem):
            return key
    return None


def parse_state(text: str) -> ParsedState:
    """Split a MEMORY.md: hand-written preamble, the ``_Last dream_`` header, the sections.

    Everything before ``# Working Memory State`` (or before the first schema
    section when the title is missing) is the preamble, kept verbatim.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == TITLE), None)
    if start is None:
        start = next((i for i, line in enumerate(lines) if _section_key(line)), len(lines))
    state = ParsedState(preamble="\n".join(lines[:start]).rstrip())
    current: str | None = None
    body: dict[str, list[str]] = {}
    for line in lines[start:]:
        key = _section_key(line)
        if key is not None:
            current = key
            body.setdefault(key, [])
            continue
        if current is None:
            if line.startswith("_Last dream:"):
                state.header = line.strip()
            continue
        body[current].append(line)
    state.sections = {key: "\n".join(value).strip() for key, value in body.items()}
    if state.preamble.endswith(DREAM_SEPARATOR):
        state.preamble = state.preamble[: -len(DREAM_SEPARATOR)].rstrip()
    return state


def preamble_of(text: str) -> str:
    """Hand-written content to keep above the schema: everything before the title, or the
    whole file when it has no ``# Working Memory State`` (a hand-written MEMORY.md)."""
    if not any(line.strip() == TITLE for line in text.splitlines()):
        return text.strip()
    return parse_state(text).preamble


def render_state(sections: dict[str, str], last_dream: str, mood: str, preamble: str = "") -> str:
    """MEMORY.md text: title, ``_Last dream | Mood_`` header and the 7 sections in order.

    A hand-written ``preamble`` stays on top, separated by the seed's transition
    marker (its conservative first cycle after a seed migration).
    """
    parts: list[str] = []
    if preamble.strip():
        parts += [preamble.rstrip(), "", DREAM_SEPARATOR, ""]
    parts += [TITLE, "", f"_Last dream: {last_dream} | Mood: {mood}_", ""]
    for key, heading in SECTIONS:
        parts += [heading, "", sections.get(key, "").strip() or "_(nothing yet)_", ""]
    return "\n".join(parts).rstrip() + "\n"


def pointer_lines(text: str) -> list[tuple[str, str]]:
    """``(topic, keywords)`` of every Crystal Pointer line in a state's pointer section."""
    body = parse_state(text).sections.get("pointers", "")
    return [(m["topic"], m["keywords"].strip()) for m in map(_POINTER_LINE.match, body.splitlines()) if m]


def substance_chars(text: str) -> int:
    """Characters of real content: not headings, the header line, guidance or placeholders."""
    count = 0
    for line in parse_state(text).sections.values():
        for row in line.splitlines():
            row = row.strip()
            if not row or row.startswith("#") or row.startswith("<!--"):
                continue
            if row.startswith("_") and row.endswith("_"):
                continue  # italic guidance such as POINTER_GUIDANCE or "_(nothing yet)_"
            count += len(row)
    return count


def missing_sections(text: str) -> list[str]:
    present = parse_state(text).sections
    return [heading for key, heading in SECTIONS if key not in present]


def collapse_reason(new_text: str, old_text: str | None) -> str | None:
    """Why a synthesis must be rejected, or None (seed: ``validateWorkingMemory()``).

    Seed guards: "Mass drop: rejects synthesis if new state is <50% the length of
    a mature (>2000 char) previous state"; "Eviction runaway: rejects if >20
    crystal pointers"; "Empty synthesis: rejects if all section headers present
    but <50 chars of substance". A synthesis missing any of the 7 required
    sections is refused too (the schema, checked before the guards).
    """
    old_length = len(old_text or "")
    if old_length > MATURE_STATE_CHARS and len(new_text) < MASS_DROP_RATIO * old_length:
        return f"mass drop: {len(new_text)} chars is under half of the previous {old_length}"
    pointers = len(pointer_lines(new_text))
    if pointers > MAX_POINTERS:
        return f"eviction runaway: {pointers} crystal pointers (at most {MAX_POINTERS})"
    missing = missing_sections(new_text)
    if missing:
        return "missing sections: " + ", ".join(missing)
    substance = substance_chars(new_text)
    if substance < MIN_SUBSTANCE_CHARS:
        return f"empty synthesis: {substance} chars of substance (at least {MIN_SUBSTANCE_CHARS})"
    return None


def bootstrap_budget_chars(window_tokens: int) -> int:
    """MEMORY.md budget for a model's context window (seed's adaptive bootstrap table).

    200K+ → 8,000 chars; 128K → 6,000; 64K → 4,000; 32K (and smaller) → 3,200.
    A window between two rows gets the smaller row's budget.
    """
    for window, budget in BOOTSTRAP_BUDGETS:
        if window_tokens >= window:
            return budget
    return SMALLEST_BUDGET_CHARS


def truncate_to_budget(text: str, budget_chars: int) -> str:
    """``text`` if it fits, else cut at a line boundary with the seed's note appended."""
    if len(text) <= budget_chars:
        return text
    room = max(0, budget_chars - len(TRUNCATION_NOTE) - 2)
    cut = text[:room]
    if "\n" in cut:
        cut = cut[: cut.rfind("\n")]
    return cut.rstrip() + "\n\n" + TRUNCATION_NOTE
