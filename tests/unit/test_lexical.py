"""Whole-token identifier matching used to rank exact identifier hits first."""

from __future__ import annotations

import pytest

from node.crystals.lexical import exact_matches


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
