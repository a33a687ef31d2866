"""Dream insights (seeds 001 / 003): what new sessions and notes taught, as rules over plain text.

Seed 001: a dream reads "Old MEMORY.md + scratch.md + new crystals + dream
insights"; seed 003 names the insight's life: "Dream confidence floor 0.3",
"Dream validation window 7d confirm / 14d expire". Here a dream turns the
sentences of its new material that state a **fact**, a **preference**, a
**decision** or an **open question** into insight crystals (origin ``dream``),
each linked to the crystals it was read from. Rule-based and deterministic: no
model is called (the optional LLM synthesiser only classifies what these rules
found, :mod:`node.memory.working.dream.llm`).

The schedule, read as one rule (the seed gives the two numbers only):

* an insight is born at the floor, 0.3, with a TTL of 14 days (:data:`EXPIRE_AFTER_MS`);
* a later dream that reads it again in a *new* source sights it: confidence moves
  :data:`CONFIRMATION_STEP` of the way to 1 and the source is linked;
* a sighting within 7 days of the previous one (:data:`CONFIRM_WINDOW_MS`)
  **confirms** it: the TTL is lifted and it lives on like any memory (importance /
  energy decide); a later sighting only renews the trial, 14 days from then;
* an insight nobody confirms expires when its TTL runs out (consolidation's
  ``ttl_elapsed``), so a passing remark is forgotten and a repeated one is kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from node.memory.search import STOPWORDS

DAY_MS = 24 * 3_600_000
CONFIRM_WINDOW_MS = 7 * DAY_MS
"""Seed 003: "Dream validation window 7d confirm" — two sightings this close confirm an insight."""
EXPIRE_AFTER_MS = 14 * DAY_MS
"""Seed 003: "… / 14d expire" — an unconfirmed insight's TTL from its (latest) sighting."""
CONFIRMATION_STEP = 0.2
"""Share of the remaining doubt a new sighting removes (ours, as a retrieval marked useful):
0.3 → 0.44 → 0.552, past seed 003's 0.5 "after validation" at the second confirmation."""

MAX_SENTENCE_CHARS = 300
MIN_SENTENCE_CHARS = 12
MAX_PER_SOURCE = 5
SAME_INSIGHT = 0.8
"""Two statements are one insight when their content-word sets overlap this much (Jaccard),
the near-duplicate bar the budgeted context uses."""
NOT_A_SPEAKER_OF_THE_USER = frozenset({"assistant", "system", "tool", "model", "ai", "summary"})
"""Turns by these roles state nothing about the user: their sentences are not mined."""


class InsightKind(StrEnum):
    QUESTION = "question"
    DECISION = "decision"
    PREFERENCE = "preference"
    FACT = "fact"


# First match wins, in this order: "should we ... ?" is an open question, not a decision.
_RULES: tuple[tuple[InsightKind, re.Pattern[str]], ...] = (
    (InsightKind.QUESTION, re.compile(
        r"(\?\s*$|\b(todo|open question|not sure|unclear|need to find out|find out whether|"
        r"figure out|still unknown|unresolved|to be decided|tbd)\b)", re.IGNORECASE)),
    (InsightKind.DECISION, re.compile(
        r"\b(we|i|they|the team) (have |had )?(decided|agreed|chose|settled on|will go with|"
        r"are going with|went with)\b|\bdecision (is|was)\b|\blet'?s go with\b|\bgoing forward\b",
        re.IGNORECASE)),
    (InsightKind.PREFERENCE, re.compile(
        r"\b(prefers?|preferred|preference|favou?rite)\b|"
        r"\b(i|we|user|he|she|they) (really |strongly )?(like|likes|love|loves|hate|hates|"
        r"dislike|dislikes|want|wants|don'?t want|can'?t stand)\b|\b(always|never|please don'?t|"
        r"don'?t ever)\b|\brather than\b", re.IGNORECASE)),
    (InsightKind.FACT, re.compile(
        r"\b(my name is|name is|call me|i live in|lives in|i work (at|for|on)|works (at|for)|"
        r"deadline|due (on|by)|birthday|born (in|on)|moved to|is located|runs on|we use|i use)\b",
        re.IGNORECASE)),
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9][a-z0-9'_-]*")
_STOP = STOPWORDS | {"just", "also", "very", "really", "about", "yes"}


@dataclass(frozen=True)
class SourceText:
    """One crystal a dream reads: a scratch note's crystal or a session turn."""

    crystal_id: str
    text: str
    speaker: str | None = None


@dataclass
class Candidate:
    """A statement the rules found, with every source it was read from."""

    kind: InsightKind
    statement: str
    speaker: str | None
    source_ids: list[str] = field(default_factory=list)
    terms: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.terms = content_terms(self.statement)

    def text(self) -> str:
        """The insight crystal's text: ``<Kind>[ (speaker)]: <statement>``."""
        who = f" ({self.speaker})" if self.speaker else ""
        return f"{self.kind.value.capitalize()}{who}: {self.statement}"


def content_terms(text: str) -> frozenset[str]:
    """Lower-cased words that carry content (no stop words, no one-letter tokens)."""
    return frozenset(word for word in _WORD.findall(text.lower()) if len(word) > 1 and word not in _STOP)


def same_insight(left: frozenset[str], right: frozenset[str]) -> bool:
    """Word-set Jaccard at or above :data:`SAME_INSIGHT` (two empty sets are not an insight)."""
    if not left or not right:
        return False
    return len(left & right) / len(left | right) >= SAME_INSIGHT


def sentences(text: str) -> list[str]:
    """Sentences of ``text``, whitespace collapsed, within the length bounds."""
    out = []
    for piece in _SENTENCE_END.split(text):
        sentence = " ".join(piece.split()).strip(" -*>")
        if MIN_SENTENCE_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS:
            out.append(sentence)
    return out


_TURN_DATE = re.compile(r"^\([^)\n]{1,80}\)\s*")
_SUBAGENT = re.compile(r"^\[subagent[^\]\n]{0,80}\]\s*")


def _spoken(source: SourceText) -> str:
    """A turn's words without the ``(<date>) <speaker>:`` its stored text opens with."""
    if source.speaker is None:
        return source.text
    text = _SUBAGENT.sub("", _TURN_DATE.sub("", source.text, count=1), count=1)
    label, colon, rest = text.partition(":")
    # "Priya: …" (conversations), "user: …" (transcripts: the label opens with the role)
    if colon and len(label) <= 120 and label.strip().lower().startswith(source.speaker.strip().lower()):
        return rest.lstrip()
    return text


def classify(sentence: str) -> InsightKind | None:
    """The first rule that matches ``sentence`` (question, decision, preference, fact), or None."""
    for kind, pattern in _RULES:
        if pattern.search(sentence):
            return kind
    return None


def extract(sources: Iterable[SourceText]) -> list[Candidate]:
    """Candidates from ``sources``, one per distinct statement and kind, in source order;
    a statement read in several sources keeps all of them (each one is evidence)."""
    found: list[Candidate] = []
    seen = LiveInsights(())
    for source in sources:
        if source.speaker is not None and source.speaker.strip().lower() in NOT_A_SPEAKER_OF_THE_USER:
            continue
        taken = 0
        for sentence in sentences(_spoken(source)):
            kind = classify(sentence)
            if kind is None:
                continue
            candidate = Candidate(kind, sentence, source.speaker, [source.crystal_id])
            twin = seen.match(candidate)
            if twin is not None:
                earlier = found[int(twin)]
                if source.crystal_id not in earlier.source_ids:
                    earlier.source_ids.append(source.crystal_id)
                continue
            seen.add(str(len(found)), candidate)
            found.append(candidate)
            taken += 1
            if taken >= MAX_PER_SOURCE:
                break
    return found


@dataclass(frozen=True)
class Sighting:
    """What a new sighting does to a live insight (pure: :func:`sight`)."""

    confidence: float
    confirmed: bool  # within the window: the TTL is lifted
    expires_at_ms: int | None  # the renewed deadline, or None once confirmed


def sight(confidence: float, last_seen_ms: int, confirmed: bool, now_ms: int) -> Sighting:
    """A later dream read the insight again in a new source (see the module docstring)."""
    raised = min(1.0, max(0.0, confidence) + CONFIRMATION_STEP * (1.0 - max(0.0, confidence)))
    if confirmed or now_ms - last_seen_ms <= CONFIRM_WINDOW_MS:
        return Sighting(raised, True, None)
    return Sighting(raised, False, now_ms + EXPIRE_AFTER_MS)


class LiveInsights:
    """The live insights of a namespace, indexed by term so a dream matches each candidate in
    time that grows with the candidates, not with candidates × insights.

    Jaccard ≥ 0.8 needs ``|A ∩ B| ≥ 0.8 · |A ∪ B| ≥ ⌈0.8 · |A|⌉``, so a match holds at least
    one of the ``|A| − ⌈0.8 · |A|⌉ + 1`` rarest terms of ``A``: only their postings are read.
    """

    def __init__(self, live: Sequence[tuple[str, str, frozenset[str]]]) -> None:
        self.entries = list(live)
        self.postings: dict[str, list[int]] = {}
        for position, (_, _, terms) in enumerate(self.entries):
            for term in terms:
                self.postings.setdefault(term, []).append(position)

    def match(self, candidate: Candidate) -> str | None:
        """The id of the earliest live insight of the same kind that ``candidate`` states again."""
        terms = candidate.terms
        if not terms:
            return None
        needed = math.ceil(SAME_INSIGHT * len(terms) - 1e-9)
        rarest = sorted(terms, key=lambda term: (len(self.postings.get(term, ())), term))
        positions = sorted({p for term in rarest[: len(terms) - needed + 1] for p in self.postings.get(term, ())})
        for position in positions:
            insight_id, kind, known = self.entries[position]
            if kind == candidate.kind.value and same_insight(known, terms):
                return insight_id
        return None

    def add(self, insight_id: str, candidate: Candidate) -> None:
        position = len(self.entries)
        self.entries.append((insight_id, candidate.kind.value, candidate.terms))
        for term in candidate.terms:
            self.postings.setdefault(term, []).append(position)


CLASSIFIER_TYPES = ("fact", "preference", "decision", "question", "goal", "relationship", "episode", "insight")
CLASSIFIER_LAYERS = ("experience", "world_fact", "mental_model", "directive")
_WORLD_TYPES = ("fact", "preference", "goal", "relationship")


@dataclass(frozen=True)
class Classification:
    """What the LLM synthesiser says a candidate is (seed 000's type and ``epistemicLayer``)."""

    semantic_type: str  # the insight crystal's type, chosen so its derived layer is the one given
    kind: str  # the classifier's own type word, recorded with the insight
    directive: bool  # proposed as a directive: the user decides (never adopted silently)


def classification(type_word: object, layer: object) -> Classification | None:
    """A classifier's (type, layer) pair as a crystal type whose epistemic layer
    (:func:`node.crystals.epistemic_layer`) is that layer; None if either is unknown.

    ``experience`` → ``episode``; ``world_fact`` → the type itself when it is a fact,
    preference, goal or relationship (else ``fact``); ``mental_model`` → ``insight``;
    ``directive`` → ``insight`` too, plus a proposal: a directive outranks everything
    the node knows, so only the user may make one.
    """
    if type_word not in CLASSIFIER_TYPES or layer not in CLASSIFIER_LAYERS:
        return None
    kind = str(type_word)
    if layer == "experience":
        semantic_type = "episode"
    elif layer == "world_fact":
        semantic_type = kind if kind in _WORLD_TYPES else "fact"
    else:
        semantic_type = "insight"
    return Classification(semantic_type, kind, layer == "directive")
