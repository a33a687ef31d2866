"""A calibrated relevance for each search hit: the probability, in [0, 1], that the hit is relevant.

Fused scores rank within one query and mean nothing across queries (each list is
normalised by its own best), so an agent cannot tell "nothing relevant" from a
weak answer by them. :func:`relevance` is a logistic calibration (Platt scaling)
of three features of a hit that do carry across queries:

* ``dense``: how many standard deviations the hit's dense score (as fusion saw
  it: cosine of the query and the memory, plus the second opinion's share when
  the store has one; a hit that only BM25 found takes the dense list's lowest
  score) stands above the mean of the dense candidates. The raw cosine does not
  carry: every turn of a conversation is about as close to a question about it
  (cosines 0.5-0.8 for all), while a reworded question's answer in a varied
  store sits at 0.5 among unrelated memories at 0.1;
* ``lexical``: the hit's BM25 score over the best of its list, times the
  query's lexical evidence (:func:`node.memory.search.fusion.lexical_evidence`):
  how far the memory holds the query's words, counted only when they carry
  evidence;
* ``rank``: its place in the result (0 first), as ``1 / (1 + rank)``.

``p = 1 / (1 + exp(-(b0 + b_dense * dense + b_lexical * lexical + b_rank / (1 + rank))))``,
every coefficient but the intercept positive, so relevance never falls when a
feature rises (tests/unit/memory/test_relevance.py checks it).

Where the constants come from: a logistic regression (Newton's method, L2 1.0;
LoCoMo's hits and the project sets' hits weighted half and half) of "this hit
is one of the question's judged relevant memories" on the top-10 hits of the
product, over the tune data only: LoCoMo conversations 26, 30 and 41
(categories 1-4) and tests/data/retrieval_v2, retrieval_set, retrieval_fresh,
fresh2, fresh3 and fresh4 (19,460 hits, 2,308 relevant), with the default
embedder (MiniLM int8 + the L3 second opinion). Held back: LoCoMo 42 and 43 and retrieval_fresh5
(docs/retrieval-tuning.md, "Calibrated relevance", has the fit, its reliability
on the held-back sets and how to refit it for another embedder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """Coefficients of :func:`relevance` (see the module docstring for where they come from)."""

    intercept: float = -4.602
    dense: float = 0.469
    lexical: float = 2.08
    rank: float = 2.676


DEFAULT_CALIBRATION = Calibration()


def relevance(dense: float, lexical: float, rank: int,
              calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """The calibrated probability that a hit is relevant (features: see the module docstring)."""
    logit = (calibration.intercept + calibration.dense * dense + calibration.lexical * lexical
             + calibration.rank / (1 + max(rank, 0)))
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    odds = math.exp(logit)  # the form that cannot overflow for a very negative logit
    return odds / (1.0 + odds)
