"""Negated parts of a search question: "the Postgres upgrade that was *not on the main cluster*".

A question that picks one memory out of several by what it is *not* ("which
flight was not to Amsterdam", "the bastion that does not go through Teleport")
is a trap for both lists: BM25 and the embedder both favour the memory that
says "Amsterdam" or "Teleport", which is the one ruled out. :func:`split_negation`
finds the negated phrase, so that search can rank on the rest of the question
and count the negated words against a memory instead of for it.

Only *selection* questions are read this way: those that open with a noun
phrase or ``which``/``what`` ("the …", "which …", "a …", "not the …"). A question
asking for an explanation ("why didn't the backup run", "how come …") keeps
its words, because its answer is likely to contain them.

The negated phrase runs from the cue (``not``, ``n't``, ``never``, ``no longer``,
``nothing to do with``, ``other than``, ``except``, ``besides``, ``apart from``,
``rather than``, ``instead of``) to the next ``,`` ``;`` ``:`` ``.`` ``?`` ``!`` or
``but``; ``or`` continues it ("not a Visa statement or a tax slip"). In a
*memory* ``no``, ``none``, ``nobody``, ``nothing`` and ``without`` open a negated
phrase too ("no customer was affected"), so that it does not count as affirming
those words; in a question they pick a memory by what it lacks and are left
alone. Pure functions only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from node.memory.search.fusion import is_code, query_tokens
from node.memory.search.lexical import terms

_CUE = re.compile(
    r"\b(?:not|never|no\s+longer|nothing\s+to\s+do\s+with|other\s+than|except|besides|apart\s+from"
    r"|rather\s+than|instead\s+of)\b|\b\w+n['’]t\b",
    re.IGNORECASE,
)
# A memory also negates with a determiner or pronoun ("no customer was affected", "nobody
# noticed", "shipped without the flag"); in a question those pick a memory by what it lacks.
_MEMORY_CUE = re.compile(rf"{_CUE.pattern}|\b(?:no|none|nobody|nothing|without)\b", re.IGNORECASE)
_SCOPE_END = re.compile(r"[,;:.?!]|\bbut\b", re.IGNORECASE)
_SELECTION = re.compile(r"\s*(?:which|what|the|a|an|not|my|our|one)\b", re.IGNORECASE)
# A crafted question could hold thousands of cues; a handful is all a real one has.
MAX_SCOPES = 4


@dataclass(frozen=True)
class Negation:
    """``positive``: the question without its negated phrases; ``negated``: their content
    terms (:func:`node.memory.search.lexical.terms`) that the positive part does not also use."""

    positive: str
    negated: frozenset[str]


def split_negation(query: str) -> Negation | None:
    """The negated phrases of a selection question, or ``None`` when it has none."""
    if not _SELECTION.match(query):
        return None
    positive, scopes = _split(query, MAX_SCOPES)
    if not scopes:
        return None
    negated = frozenset(set().union(*(_terms(scope) for scope in scopes)) - _terms(positive))
    if not negated or not terms(positive):
        return None  # nothing left to rule out, or nothing left to search for
    return Negation(positive, negated)


def negated_share(negation: Negation, text: str) -> float:
    """The share of the negated terms that ``text`` affirms, in [0, 1].

    Words the memory itself negates ("nothing to do with locks", "no customer was
    affected") do not count: such a memory is not the one the question rules out.
    """
    affirmed, _ = _split(text, MAX_SCOPES * 4, _MEMORY_CUE)
    # An identifier counts whole (pg-main-20 does not affirm pg-main-02) and by its words
    # (lock_timeout affirms "lock timeouts").
    return len(negation.negated & (_terms(affirmed) | terms(affirmed.replace("_", " ")))) / len(negation.negated)


def _split(text: str, limit: int, cue: re.Pattern[str] = _CUE) -> tuple[str, list[str]]:
    """``text`` without its first ``limit`` negated phrases (each opened by ``cue``), and those phrases."""
    kept: list[str] = []
    scopes: list[str] = []
    position = 0
    for found in cue.finditer(text):
        if found.start() < position:
            continue  # inside a scope already taken
        if len(scopes) == limit:
            break
        end = _SCOPE_END.search(text, found.end())
        stop = end.start() if end else len(text)
        kept.append(text[position : found.start()])
        scopes.append(text[found.end() : stop])
        position = stop
    kept.append(text[position:])
    return " ".join(" ".join(kept).split()), scopes


def _terms(text: str) -> set[str]:
    """Content terms, a code (``pg-main-02``, ``v2.3.1``: :func:`node.memory.search.fusion.is_code`)
    kept whole rather than in pieces; one pass over the text."""
    codes: set[str] = set()
    words: list[str] = []
    for token in query_tokens(text):
        if is_code(token):
            codes.add(token.lower())
        else:
            words.append(token)
    return codes | terms(" ".join(words))
