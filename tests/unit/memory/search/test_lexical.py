"""Whole-token identifier matching used to rank exact identifier hits first."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.memory.search.fusion import query_tokens
from node.memory.search.lexical import (
    _AFTER,
    _BEFORE,
    exact_matcher,
    exact_matches,
    lexical_confidence,
)


@pytest.mark.parametrize(
    ("identifiers", "text", "expected"),
    [
        (["ERR-4091"], "ERR-4091 means the key was reused.", 1),
        (["ERR-4091"], "ERR-4019 means the key expired.", 0),
        (["err-4091"], "see ERR-4091, then retry", 1),
        (["ERR-4091"], "ERR-40912 is another code", 0),
        (["v2.3.1"], "Mobile app v2.3.1 shipped.", 1),
        (["v2.3.1"], "Mobile app v2.3.10 shipped.", 0),
        (["v2.3.1"], "Mobile app xv2.3.1 shipped.", 0),
        (["db-prod-08"], "replica db-prod-08; lag", 1),
        (["db-prod-08"], "db-prod-08.internal is a host", 0),
        (["services/payouts/batcher.py"], "code in services/payouts/batcher.py: MAX_BATCH", 1),
        (["batcher.py"], "code in services/payouts/batcher.py", 0),
        (["PAY-1182", "PAY-1218"], "PAY-1182 blocked; PAY-1218 picked up; PAY-1182 again", 2),
        (["PAY-1182", "pay-1182"], "PAY-1182", 1),
        ([], "anything", 0),
        (["a+b(c"], "regex chars a+b(c stay literal", 1),
    ],
)
def test_exact_matches(identifiers: list[str], text: str, expected: int) -> None:
    assert exact_matches(identifiers, text) == expected


def test_lexical_confidence_hand_worked() -> None:
    # query terms irs, refun, june. Over the 3 hits: df irs 2, refun 2, june 1, so
    # idf = ln(4 / 2.5) = 0.4700, 0.4700 and ln(4 / 1.5) = 0.9808; mass 1.9208.
    # The best hit holds irs + refun: 0.9400 / 1.9208 = 0.4894.
    texts = [
        "The IRS refund arrived.",
        "IRS tax return submitted; refund expected in June.",
        "Salary is paid on the 25th.",
    ]
    assert lexical_confidence("IRS refund June", texts) == pytest.approx(0.4894, abs=1e-4)


def test_lexical_confidence_bounds() -> None:
    assert lexical_confidence("quick supper for exhausted evenings", ["dinner is dal"]) == 0.0
    assert lexical_confidence("anything", []) == 0.0
    assert lexical_confidence("the of and", ["the of and"]) == 0.0
    assert lexical_confidence("IRS refund", ["the IRS refund", "IRS refund"]) == pytest.approx(1.0)


@given(st.text(max_size=200), st.lists(st.text(max_size=200), max_size=12))
def test_lexical_confidence_is_in_the_unit_interval_for_any_text(
    query: str, texts: list[str]
) -> None:
    assert 0.0 <= lexical_confidence(query, texts) <= 1.0


def regex_count(identifiers: list[str], text: str) -> int:
    """The matcher's rule as one compiled alternation (how it was written before the ASCII scan)."""
    tokens = list(dict.fromkeys(token.lower() for token in identifiers))
    if not tokens:
        return 0
    alternation = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
    pattern = re.compile(_BEFORE + "(?:" + alternation + ")" + _AFTER, re.IGNORECASE)
    return len({match.group(0).lower() for match in pattern.finditer(text)})


# Identifier punctuation, separators, and letters that match ASCII ones case-insensitively
# (long s, dotless i, Kelvin sign) or lower-case to two characters (dotted capital I).
ALPHABET = "aAbB19_.-/:#@ +,\u017f\u0131\u0130\u212a"


@settings(max_examples=3000, derandomize=True, deadline=None)
@given(st.text(ALPHABET, max_size=12), st.text(ALPHABET, min_size=1, max_size=6))
def test_the_ascii_scan_counts_what_the_pattern_counts(text: str, query: str) -> None:
    identifiers = query_tokens(query)  # what search passes: fusion's tokens of the query
    assert exact_matcher(identifiers)(text) == regex_count(identifiers, text)
