"""The optional LLM synthesiser: any OpenAI-compatible chat-completions endpoint.

Configured in node.toml (``memory.dream_synthesiser = "llm"``, ``dream_llm_url``,
``dream_llm_model``, ``dream_llm_key_env`` naming the environment variable that
holds the key; the key itself never sits in a file). The prompt follows the
seed's structure: the RLM state-update instruction with the hormonal section
weights, then one input block per term of ``f(Old + Scratch + Crystals + Insights)``
plus economics, curiosity targets and detected emerging skills.

Whatever the endpoint answers is untrusted: the body is size-limited, the
reply must carry all 7 sections, and the collapse guards judge the result. If
the endpoint fails or answers nonsense, the dream falls back to the extractive
synthesiser and says so. Tests run it against a local stub server: the one
boundary of working memory that is faked.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import httpx

from node.memory.chat import LlmError, chat_completion
from node.memory.learning import Candidate, Classification, classification
from node.memory.working.dream.extractive import ExtractiveSynthesiser
from node.memory.working.dream.inputs import (
    Classified,
    SearchFn,
    Synthesis,
    SynthesisInput,
    describe_mood,
    section_weight,
)
from node.memory.working.dream.pointers import carried_pointers
from node.memory.working.dream.sections import micro_usdc_text, shorten
from node.memory.working.dream.skills import emerging_line
from node.memory.working.scratch import utc_now_iso
from node.memory.working.state import (
    SECTIONS,
    missing_sections,
    parse_state,
    pointer_lines,
    preamble_of,
    render_state,
)
from protocol.codec import json_too_deep

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 256 * 1024
MAX_PROMPT_CRYSTALS = 40
_FENCE = re.compile(r"^```(?:markdown|md)?\s*\n(?P<body>.*?)\n```\s*$", re.DOTALL)

SYSTEM_PROMPT = """\
You maintain an AI agent's working memory: MEMORY.md, a state vector, not a summary.
Perform one state update: New_State = f(Old_State + Scratch_Delta + New_Crystals + Dream_Insights).

Write exactly these 7 sections, as level-2 markdown headings, in this order:
{headings}

Rules:
- Keep it under ~2,000 tokens (about 8,000 characters).
- Hormonal attention: update a section aggressively when its hormone is high
  (weights below: 0 = keep the old lines, 1 = rewrite from the new material).
  The Bond follows oxytocin; Active Context follows dopamine (breakthroughs) and cortisol
  (frictions: explicit things to avoid).
- Nothing is deleted: a topic fading from Active Context becomes one Crystal Pointer line
  `- Past: <topic> → search: `<3-6 keywords>`` with keywords copied from the crystal's own text.
  Never more than 20 pointers.
- The Niche reports the economic data given, in USDC, without inventing numbers.
- Emerging Skills keeps the lines `- <pattern> → Confidence: NN% | Occurrences: N | id: XXXXXXXX`.
- Answer with the markdown of the 7 sections only."""


MAX_CLASSIFIED = 200
"""Candidates sent for classification in one dream (the rest keep the rules' kind)."""
MAX_CLASSIFY_DEPTH = 8
"""``{"items": [{...}]}`` nests 3 deep; a deeper reply is refused before ``json.loads`` recurses."""

CLASSIFY_PROMPT = """\
You classify statements that an AI agent's memory extracted from its user's sessions and notes.
For each numbered statement give its type and its epistemic layer.
- type: one of fact, preference, decision, question, goal, relationship, episode, insight
- layer: one of
  experience (one thing that happened),
  world_fact (true of the world or of the user),
  mental_model (an inference, generalisation or guess),
  directive (an explicit standing instruction from the user about how the agent must always behave)
Answer with JSON only: {"items": [{"index": 0, "type": "...", "layer": "..."}, ...]}"""


class LlmUnavailable(LlmError):
    """The LLM endpoint failed or answered something that is not a working-memory state."""

    code = "llm_unavailable"


def build_prompt(data: SynthesisInput) -> list[dict[str, str]]:
    """The chat messages: the seed's instruction, then one block per input."""
    levels = data.hormones
    headings = "\n".join(heading for _, heading in SECTIONS)
    new_lines = [
        f"- [{c.semantic_type}, importance {c.importance:.2f}, accessed {c.access_count}x] "
        f"{shorten(c.text, 300)}"
        for c in data.crystals if c.id in data.new_crystal_ids
    ]
    blocks = [
        "## Old State (current MEMORY.md)\n" + (data.old_state.strip() or "(empty: first dream)"),
        "## Scratch Delta (unsynthesized notes)\n" + ("\n".join(n.seed_line() for n in data.notes)
                                                     or "(none)"),
        "## New Crystals\n" + ("\n".join(new_lines[:MAX_PROMPT_CRYSTALS]) or "(none)"),
        "## Dream Insights\n" + ("\n".join(f"- {shorten(c.text, 300)}" for c in data.insights)
                                 or "(none)"),
        f"## Hormonal State\nMood: {describe_mood(levels)}\n"
        f"Section weights: The Bond {section_weight(levels.oxytocin):.2f}, Active Context "
        f"{section_weight(max(levels.dopamine, levels.cortisol)):.2f}",
        "## Emerging Skills (detected from access counts and executions)\n"
        + ("\n".join(emerging_line(s) for s in data.emerging) or "(none)"),
    ]
    if data.niche is not None:
        niche = data.niche
        blocks.append(
            "## Economic Data (for The Niche)\n"
            f"Earnings {micro_usdc_text(niche.earned_micro_usdc)} USDC, spending "
            f"{micro_usdc_text(niche.spent_micro_usdc)} USDC, listed skills {niche.listed_skills}, "
            f"unique buyers {niche.unique_buyers}\nTop skills: "
            + ("; ".join(f"{t.name} {micro_usdc_text(t.earned_micro_usdc)} USDC" for t in niche.top_skills)
               or "none")
            + "\n7-day earnings: " + ", ".join(micro_usdc_text(day[1]) for day in niche.trend_7d))
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(headings=headings)},
        {"role": "user", "content": "\n\n".join(blocks)},
    ]


def classify_prompt(candidates: Sequence[Candidate]) -> list[dict[str, str]]:
    lines = [f"{index}. {shorten(candidate.statement, 300)}" for index, candidate in enumerate(candidates)]
    return [{"role": "system", "content": CLASSIFY_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def parse_classes(reply: str, count: int) -> dict[int, Classification]:
    """The classifications in an (untrusted) reply: items with a known index, type and layer;
    anything else is ignored. ``LlmUnavailable`` if the reply is not the JSON asked for."""
    body = reply.encode("utf-8")
    if json_too_deep(body, MAX_CLASSIFY_DEPTH):
        raise LlmUnavailable("the classification reply nests too deep")
    try:
        data: Any = json.loads(body)
    except ValueError as error:
        raise LlmUnavailable("the classification reply is not JSON") from error
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise LlmUnavailable("the classification reply has no items list")
    out: dict[int, Classification] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or index in out:
            continue
        found = classification(item.get("type"), item.get("layer"))
        if found is not None:
            out[index] = found
    return out


def reply_text(content: str) -> str:
    """The state in the assistant's ``content`` (unfenced); ``LlmUnavailable`` if it is empty."""
    if not content.strip():
        raise LlmUnavailable("the LLM endpoint answered with no text")
    fenced = _FENCE.match(content.strip())
    return fenced["body"] if fenced else content


class LlmSynthesiser:
    name = "llm"

    def __init__(self, url: str, model: str, key_env: str = "", timeout_s: float = 60.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise LlmUnavailable("memory.dream_llm_url must be an http(s) URL")
        if not model:
            raise LlmUnavailable("memory.dream_llm_model is not set")
        self.endpoint = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.key_env = key_env
        self.timeout_s = timeout_s
        self.transport = transport
        self.fallback = ExtractiveSynthesiser()

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def complete(self, messages: list[dict[str, str]]) -> str:
        payload = {"model": self.model, "messages": messages, "temperature": 0}
        with httpx.Client(timeout=self.timeout_s, transport=self.transport,
                          follow_redirects=False) as client:
            try:
                content = chat_completion(client, self.endpoint, payload, MAX_REPLY_BYTES,
                                          self._headers())
            except LlmError as error:
                raise LlmUnavailable(str(error)) from error
        return reply_text(content)

    def classify(self, candidates: Sequence[Candidate]) -> Classified:
        """Type and epistemic layer of each insight candidate; a ``directive`` becomes a proposal
        for the user (``node.memory.learning.dreaming``). A failed call keeps the rules' kinds."""
        batch = list(candidates[:MAX_CLASSIFIED])
        if not batch:
            return Classified(self.name)
        try:
            classes = parse_classes(self.complete(classify_prompt(batch)), len(batch))
        except LlmUnavailable as error:
            log.warning("dream: LLM classification failed (%s); insights keep the rules' kinds", error)
            return Classified("rules", {}, str(error))
        return Classified(self.name, classes)

    def synthesise(self, data: SynthesisInput, search: SearchFn) -> Synthesis:
        try:
            reply = self.complete(build_prompt(data))
            missing = missing_sections(reply)
            if missing:
                raise LlmUnavailable("the LLM reply lacks " + ", ".join(missing))
        except LlmUnavailable as error:
            log.warning("dream: LLM synthesis failed (%s); using the extractive synthesiser", error)
            synthesis = self.fallback.synthesise(data, search)
            synthesis.fallback_reason = str(error)
            return synthesis
        sections = parse_state(reply).sections
        text = render_state(sections, utc_now_iso(data.now_ms), describe_mood(data.hormones),
                            preamble_of(data.old_state) if data.old_state.strip() else "")
        pointers = carried_pointers(pointer_lines(text), search)
        return Synthesis(text, self.name, pointers)
