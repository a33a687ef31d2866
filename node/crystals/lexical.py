"""Exact identifier matching for search: a memory naming the query's rare token ranks first.

FTS5's ``unicode61`` tokenizer splits ``ERR-4091`` into ``err`` + ``4091`` and
``v2.3.1`` into ``v2`` + ``3`` + ``1``; :func:`node.crystals.fusion.fts_query`
turns such a token into an adjacent-phrase query, which finds the right rows
but lets BM25 weigh them against incidental word matches, and dense
similarity cannot tell ``ERR-4091`` from ``ERR-4019``. After fusion,
:meth:`Memory.search` therefore orders hits first by how many of the query's
identifier-like tokens (:func:`node.crystals.fusion.identifier_tokens`) the
memory's text contains *whole* — not as part of a longer token, so
``v2.3.1`` does not match ``v2.3.10`` and ``ERR-4091`` does not match
``ERR-40912`` — and only then by fused score.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# Characters that continue a token (see fusion._TOKEN): a match must not be
# preceded by one, nor followed by one (a '.' or ':' only when a word character follows,
# so trailing punctuation ends the token).
_BEFORE = r"(?<![\w.\-/:#])"
_AFTER = r"(?![\w\-/#]|[.:]\w)"


def exact_matcher(identifiers: Sequence[str]) -> Callable[[str], int]:
    """A function counting how many distinct ``identifiers`` a text contains as whole tokens.

    Case-insensitive; one compiled alternation per query, one scan per text.
    """
    tokens = list(dict.fromkeys(token.lower() for token in identifiers))
    if not tokens:
        return lambda text: 0
    alternation = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
    pattern = re.compile(_BEFORE + "(?:" + alternation + ")" + _AFTER, re.IGNORECASE)

    def count(text: str) -> int:
        return len({match.group(0).lower() for match in pattern.finditer(text)})

    return count


def exact_matches(identifiers: Sequence[str], text: str) -> int:
    """How many distinct ``identifiers`` occur in ``text`` as whole tokens (case-insensitive)."""
    return exact_matcher(identifiers)(text)
