"""Section builders of the extractive synthesiser: plain data in, bullet lines out.

Each section is filled from real data only: crystals, scratch notes, the
hormonal state, the market ledger's economics. Hormone-weighted sections
(The Bond, Active Context) mix fresh material with the previous state's lines
in the proportion ``section_weight(level)``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from node.crystals import Origin
from node.memory.dynamics import compute_crystal_influence
from node.memory.working.dream.inputs import CrystalView, HormoneLevels, NicheData
from node.memory.working.dream.pointers import content_terms
from node.memory.working.scratch import ScratchNote

LINE_CHARS = 160
BOND_BUDGET = 6
ACTIVE_BUDGET = 8
TAGGED_BUDGET = 3
GAPS_BUDGET = 5
TAG_LEVEL = 0.3  # a crystal whose own influence reaches this is cortisol/dopamine-tagged
_BOND_WORDS = re.compile(
    r"\b(user|prefers?|preference|likes?|dislikes?|hates?|loves?|name is|call me|always|never|"
    r"wants?|asked|trusts?|style|tone|thank)", re.IGNORECASE)
_AUTO_HORMONE = re.compile(r"^\[AUTO\] Hormonal event: (dopamine|cortisol|oxytocin) spike")
_GAP_WORDS = re.compile(
    r"(\?|\b(todo|to do|find out|unclear|unknown|not sure|investigate|open question|"
    r"need to learn|figure out|unresolved)\b)", re.IGNORECASE)


def micro_usdc_text(amount: int) -> str:
    """Exact decimal USDC from integer micro-USDC (no float on the way)."""
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    return f"{sign}{amount // 1_000_000}.{amount % 1_000_000:06d}"


def shorten(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def note_view(note: ScratchNote, crystal_id: str | None = None) -> CrystalView:
    """A scratch note as a crystal-like view (its hormonal tags computed as at ingestion)."""
    influence = compute_crystal_influence(note.text, Origin.SESSION)
    levels = {"dopamine": influence.dopamine, "cortisol": influence.cortisol,
              "oxytocin": influence.oxytocin}
    spike = _AUTO_HORMONE.match(note.text)
    if spike:  # an [AUTO] note is tagged with the hormone it reports, not the words it quotes
        levels = {name: 1.0 if name == spike[1] else 0.0 for name in levels}
    return CrystalView(id=crystal_id or f"note:{note.id}", text=note.text, importance=note.importance,
                       created_at_ms=note.at_ms, origin="session", dopamine=levels["dopamine"],
                       cortisol=levels["cortisol"], oxytocin=levels["oxytocin"])


def _normal(line: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", line.lower()).split())


def refresh(fresh: Sequence[str], old: Sequence[str], weight: float, budget: int) -> list[str]:
    """Mix fresh lines and the previous state's lines: ``ceil(weight × budget)`` fresh first,
    then old ones, then any fresh left over; no duplicates, at most ``budget``."""
    out: list[str] = []
    seen: set[str] = set()

    def take(lines: Iterable[str], limit: int) -> None:
        for line in lines:
            if len(out) >= limit:
                return
            key = _normal(line)
            if key and key not in seen:
                seen.add(key)
                out.append(line)

    take(fresh, min(budget, math.ceil(weight * budget)))
    take(old, budget)
    take(fresh, budget)
    return out


def _recency(view: CrystalView, now_ms: int) -> float:
    age_h = max(0.0, (now_ms - (view.last_accessed_at_ms or view.created_at_ms)) / 3_600_000)
    return 1.0 / (1.0 + age_h / 24)


def phenotype(crystals: Sequence[CrystalView], mood: str) -> list[str]:
    """Who the agent is becoming: what it remembers, what it can do, what it returns to."""
    live = [c for c in crystals if c.lifecycle not in ("expired", "archived")]
    lines = []
    if live:
        by_type = Counter(c.semantic_type for c in live)
        # Ties by name: the same memories write the same MEMORY.md, whatever order their ids give.
        common = sorted(by_type.items(), key=lambda item: (-item[1], item[0]))[:4]
        kinds = ", ".join(f"{count} {kind}" for kind, count in common)
        lines.append(f"- Memory of {len(live)} crystals in view ({kinds}).")
    skills = [c for c in live if c.semantic_type == "skill"]
    if skills:
        runs = sum(c.executions for c in skills)
        wins = sum(c.successes for c in skills)
        categories = sorted({c.skill_category for c in skills if c.skill_category})
        rate = f", {round(100 * wins / runs)}% success over {runs} runs" if runs else ", not run yet"
        where = f" in {', '.join(categories[:4])}" if categories else ""
        lines.append(f"- Practises {len(skills)} skill(s){where}{rate}.")
    weights: dict[str, float] = {}
    for crystal in live:
        for term in {t.lower() for t in content_terms(crystal.text) if not t.isdigit()}:
            weights[term] = weights.get(term, 0.0) + crystal.importance * (1 + math.log1p(crystal.access_count))
    themes = sorted(weights, key=lambda term: (-weights[term], term))[:5]
    if themes:
        lines.append(f"- Keeps returning to: {', '.join(themes)}.")
    lines.append(f"- Temperament now: {mood}.")
    return lines


def bond(views: Sequence[CrystalView], old: Sequence[str], levels: HormoneLevels,
         weight: float) -> tuple[list[str], set[str]]:
    """The user as the agent knows them: preferences, relationships, social moments."""
    candidates = [v for v in views if v.semantic_type in ("preference", "relationship", "directive")
                  or v.oxytocin >= TAG_LEVEL or _BOND_WORDS.search(v.text)]
    candidates.sort(key=lambda v: (-(v.importance * (1 + v.oxytocin)), -v.created_at_ms, v.id))
    fresh = [f"- {shorten(v.text)}" for v in candidates]
    lines = refresh(fresh, old, weight, BOND_BUDGET)
    shown = {v.id for v in candidates if f"- {shorten(v.text)}" in lines}
    return lines, shown


def active_context(views: Sequence[CrystalView], old: Sequence[str], now_ms: int,
                   weight: float, exclude: set[str]) -> tuple[list[str], set[str]]:
    """Goals and recent work, then frictions (cortisol-tagged) and breakthroughs (dopamine);
    what The Bond already shows (``exclude``) is not repeated."""
    views = [v for v in views if v.id not in exclude]
    ranked = sorted(views, key=lambda v: (-(v.importance * _recency(v, now_ms)
                                            * (1 + max(v.dopamine, v.cortisol))), v.id))
    frictions = [v for v in ranked if v.cortisol >= TAG_LEVEL][:TAGGED_BUDGET]
    wins = [v for v in ranked if v.dopamine >= TAG_LEVEL and v not in frictions][:TAGGED_BUDGET]
    tagged = {v.id for v in frictions + wins}
    fresh = [f"- {shorten(v.text)}" for v in ranked if v.id not in tagged]
    old_plain = [line for line in old if not line.startswith(("- Friction:", "- Breakthrough:"))]
    lines = refresh(fresh, old_plain, weight, ACTIVE_BUDGET)
    shown = {v.id for v in ranked if f"- {shorten(v.text)}" in lines} | tagged
    lines += [f"- Friction (avoid): {shorten(v.text)}" for v in frictions]
    lines += [f"- Breakthrough: {shorten(v.text)}" for v in wins]
    return lines, shown


def curiosity_gaps(views: Sequence[CrystalView], skills: Sequence[CrystalView],
                   old: Sequence[str]) -> tuple[list[str], set[str]]:
    """Open questions in recent material, and skills that keep failing."""
    questions = [v for v in views if _GAP_WORDS.search(v.text)]
    fresh = [f"- {shorten(v.text)}" for v in questions]
    for skill in skills:
        if skill.executions >= 2 and skill.success_rate < 0.6:
            fresh.append(f"- Why does \"{shorten(skill.text, 60)}\" fail? "
                         f"{skill.successes}/{skill.executions} runs succeeded.")
    lines = refresh(fresh, old, 0.6, GAPS_BUDGET)
    return lines, {v.id for v in questions if f"- {shorten(v.text)}" in lines}


def niche(data: NicheData | None) -> list[str]:
    """Ecosystem identity from the market ledger (seed: MarketplaceEconomics)."""
    if data is None:
        return ["- Marketplace: no ledger available to this node."]
    lines = [
        f"- Earnings {micro_usdc_text(data.earned_micro_usdc)} USDC, spending "
        f"{micro_usdc_text(data.spent_micro_usdc)} USDC "
        f"(net {micro_usdc_text(data.earned_micro_usdc - data.spent_micro_usdc)}).",
        f"- Listed skills: {data.listed_skills} | Unique buyers: {data.unique_buyers}",
    ]
    if data.reputation is not None:
        lines.append(f"- Reputation (global trust): {data.reputation:.2f}")
    if data.top_skills:
        lines.append("- Top earning skills: " + "; ".join(
            f"{shorten(top.name, 40)} ({top.sales} sales, {micro_usdc_text(top.earned_micro_usdc)} USDC)"
            for top in data.top_skills[:3]))
    if data.trend_7d and any(day[1] for day in data.trend_7d):
        earned = [day[1] for day in data.trend_7d]
        lines.append("- 7-day earnings: " + ", ".join(micro_usdc_text(e) for e in earned)
                     + f" USDC ({trend_word(earned)}).")
    elif data.trend_7d:
        lines.append("- 7-day earnings: nothing earned this week.")
    return lines


def trend_word(daily: Sequence[int]) -> str:
    """Rising / falling / flat: the last three days against the first three."""
    if len(daily) < 2:
        return "flat"
    third = max(1, len(daily) // 3)
    early, late = sum(daily[:third]), sum(daily[-third:])
    return "rising" if late > early else "falling" if late < early else "flat"
