"""MEMORY.md schema, collapse guards, bootstrap sizing and the working-memory formulas (seed 001)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.memory.working.context import NOTES_HEADING, working_memory_block
from node.memory.working.dream.inputs import HormoneLevels, describe_mood, section_weight
from node.memory.working.dream.sections import micro_usdc_text, refresh, trend_word
from node.memory.working.dream.skills import confidence
from node.memory.working.migration import chunk_markdown
from node.memory.working.scratch import ScratchNote
from node.memory.working.state import (
    DREAM_SEPARATOR,
    SECTIONS,
    TRUNCATION_NOTE,
    bootstrap_budget_chars,
    collapse_reason,
    parse_state,
    pointer_lines,
    preamble_of,
    render_state,
    substance_chars,
    truncate_to_budget,
)

FULL = {key: f"- something real about {key} that has substance" for key, _ in SECTIONS}


def state(sections: dict[str, str] | None = None, preamble: str = "") -> str:
    return render_state(sections if sections is not None else FULL, "2026-03-12T16:00:00Z",
                        "calm", preamble)


def test_render_has_the_seven_sections_in_order_and_parses_back() -> None:
    text = state()
    positions = [text.index(heading) for _, heading in SECTIONS]
    assert positions == sorted(positions)
    assert text.startswith("# Working Memory State\n\n_Last dream: 2026-03-12T16:00:00Z | Mood: calm_")
    parsed = parse_state(text)
    assert parsed.sections == FULL and parsed.preamble == ""


def test_a_hand_written_preamble_stays_on_top_and_is_found_again() -> None:
    hand = "# My notes\n\nI like short answers."
    text = state(preamble=hand)
    assert text.startswith(hand) and DREAM_SEPARATOR in text and "## Dream-Generated" in text
    assert preamble_of(text) == hand
    assert preamble_of(hand) == hand  # a hand-written file without the schema is all preamble
    assert preamble_of(state()) == ""


def test_guard_mass_drop() -> None:
    old = state({**FULL, "active": "- " + "long active context line. " * 120})
    assert len(old) > 2000
    new = state()
    assert len(new) < 0.5 * len(old)
    assert (collapse_reason(new, old) or "").startswith("mass drop")
    # an immature previous state (<= 2000 chars) may shrink freely
    assert collapse_reason(new, state({**FULL, "active": "- " + "x" * 600})) is None


def test_guard_eviction_runaway() -> None:
    pointers = "\n".join(f"- Past: topic {i} → search: `kw{i} alpha beta`" for i in range(21))
    assert len(pointer_lines(state({**FULL, "pointers": pointers}))) == 21
    assert (collapse_reason(state({**FULL, "pointers": pointers}), None) or "").startswith(
        "eviction runaway")
    twenty = "\n".join(pointers.splitlines()[:20])
    assert collapse_reason(state({**FULL, "pointers": twenty}), None) is None


def test_guard_empty_synthesis() -> None:
    empty = state({key: "" for key, _ in SECTIONS})
    assert substance_chars(empty) == 0
    assert (collapse_reason(empty, None) or "").startswith("empty synthesis")
    thin = state({**{key: "" for key, _ in SECTIONS}, "bond": "- " + "y" * 40})
    assert (collapse_reason(thin, None) or "").startswith("empty synthesis")


def test_missing_sections_are_refused() -> None:
    text = state().replace("## Curiosity Gaps", "## Something Else")
    assert collapse_reason(text, None) == "missing sections: ## Curiosity Gaps"


@pytest.mark.parametrize("window,budget", [
    (1_000_000, 8000), (200_000, 8000), (199_999, 6000), (128_000, 6000),
    (100_000, 4000), (64_000, 4000), (32_000, 3200), (8_000, 3200),
])
def test_bootstrap_budget_follows_the_seed_table(window: int, budget: int) -> None:
    assert bootstrap_budget_chars(window) == budget


def test_truncation_appends_the_seed_note() -> None:
    text = "\n".join(f"line {i:04d} " + "z" * 40 for i in range(200))
    cut = truncate_to_budget(text, 3200)
    assert len(cut) <= 3200 and cut.endswith(TRUNCATION_NOTE)
    assert truncate_to_budget("short", 3200) == "short"


def test_context_block_injects_notes_and_sizes_by_window() -> None:
    notes = [ScratchNote(f"{i:016x}", f"2026-03-12T14:{i:02d}:00Z", 0.5 + i / 100, f"note {i} " + "n" * 90)
             for i in range(60)]
    big = state({**FULL, "active": "\n".join("- " + "a" * 100 for _ in range(70))})
    block = working_memory_block(big, notes, 32_000)
    head, _, tail = block.partition(NOTES_HEADING)
    assert len(head.strip()) <= 3200 and TRUNCATION_NOTE in head
    assert len(tail.strip()) <= 3200 and TRUNCATION_NOTE in tail
    kept = [line for line in tail.splitlines() if line.startswith("- [")]
    assert "note 59 " in kept[-1]  # the most important notes are the ones kept
    assert len(working_memory_block(big, notes, 200_000)) > len(block)


def test_confidence_hand_worked() -> None:
    # n / (n + 2) x success rate: 7 occurrences, 6 of 7 runs succeeded -> 7/9 x 6/7 = 2/3
    assert confidence(7, 7, 6) == pytest.approx(2 / 3)
    assert confidence(3, 0, 0) == pytest.approx(0.6)
    assert confidence(0, 0, 0) == 0.0


def test_section_weight_and_mood() -> None:
    assert section_weight(0.0) == pytest.approx(0.3)
    assert section_weight(1.0) == pytest.approx(1.0)
    assert section_weight(0.5) == pytest.approx(0.65)
    assert describe_mood(HormoneLevels(0.8, 0.02, 0.55)).startswith(
        "energised by a breakthrough, socially engaged (dopamine 0.80")
    assert describe_mood(HormoneLevels(0.1, 0.1, 0.1)).startswith("calm")


def test_refresh_mixes_fresh_and_old_by_weight() -> None:
    fresh = [f"- new {i}" for i in range(10)]
    old = [f"- old {i}" for i in range(10)]
    # weight 0.3 of 6 slots -> ceil(1.8) = 2 fresh, then 4 old
    assert refresh(fresh, old, 0.3, 6) == ["- new 0", "- new 1", "- old 0", "- old 1", "- old 2", "- old 3"]
    assert refresh(fresh, [], 0.3, 3) == ["- new 0", "- new 1", "- new 2"]
    assert refresh(["- Same!"], ["- same"], 1.0, 5) == ["- Same!"]


def test_money_and_trend() -> None:
    assert micro_usdc_text(120_000) == "0.120000"
    assert micro_usdc_text(-1) == "-0.000001"
    assert micro_usdc_text(12_345_678_901) == "12345.678901"
    assert trend_word([0, 0, 10, 0, 0, 20, 30]) == "rising"
    assert trend_word([30, 0, 0, 0, 0, 0, 0]) == "falling"
    assert trend_word([0] * 7) == "flat"


def test_seed_chunking_400_tokens_80_overlap() -> None:
    # 400 tokens ~ 1,600 chars, 80 tokens ~ 320 chars: 100 lines of 99 chars (+ newline = 100)
    text = "\n".join(f"{i:03d} " + "w" * 95 for i in range(100))
    chunks = chunk_markdown(text)
    assert all(len(chunk.text) <= 1600 for chunk in chunks)
    assert [(c.start_line, c.end_line) for c in chunks[:3]] == [(1, 16), (13, 28), (25, 40)]
    assert chunks[-1].end_line == 100
    assert chunk_markdown("") == [] and chunk_markdown("\n\n") == []
    long_line = chunk_markdown("q" * 5000)
    assert [len(c.text) for c in long_line] == [1600, 1600, 1600, 200]


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), max_size=700), max_size=40))
def test_chunks_cover_every_line_within_the_size(lines: list[str]) -> None:
    text = "\n".join(lines)
    chunks = chunk_markdown(text)
    assert all(len(chunk.text) <= 1600 for chunk in chunks)
    covered = {n for chunk in chunks for n in range(chunk.start_line, chunk.end_line + 1)}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            assert number in covered
