"""Turns of a conversation ranked with their session (docs/retrieval-tuning.md, "LoCoMo: sessions").

A conversation turn is one memory, and one turn rarely holds a whole answer: the
question "when did Caroline go to the LGBTQ support group" matches the turn that
names the group, the turn that gives the day and the turns around them, all in
one session. Scored alone, a turn of another session that shares a word or two
can rank first. Session-level retrieval on LoCoMo (arXiv 2606.04194) scores a
session by the best similarity of any of its turns (max-sim over per-turn
vectors) fused at score level with BM25 over the session, and puts the right
session first more often than either.

Here, when most of a search's candidates are conversation turns
(:func:`is_conversation`), fusion gives BM25 a fixed share
(:data:`node.memory.search.fusion.CONVERSATION_PARAMS`: a conversation's turns are
all about as close in meaning to a question about it, so the per-query trust that
suits a store of varied notes mostly silences BM25 there), every turn keeps its
own fused score (dense max-sim is the turn's own vector, BM25 the turn's own
text) and the session it belongs to adds evidence:

* a session's score is the sum of its ``depth`` best candidates' scores, each
  over the best candidate's (``depth`` 1 is the max; more rewards a session that
  several turns point to, as BM25 over a whole session does);
* a turn's score becomes ``(1 - weight) * s / s_best + weight * S / S_best``,
  ``S`` its session's score; a candidate that is no conversation turn counts as
  a session of its own (``S`` its own ``s``), so a store of notes ranks as before
  up to a common factor.

Pure function only; :func:`node.memory.search.pipeline.search` gives it each
candidate's session, read from ``conversation_turns`` by
:func:`node.memory.conversations.session_keys`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SessionParams:
    """Constants of :func:`with_sessions`: the middle of the tune plateau (LoCoMo 26, 30, 41;
    weight 0.35-0.55, depth 2 above 1 and 3; docs/retrieval-tuning.md, "LoCoMo: sessions")."""

    weight: float = 0.45
    depth: int = 2
    turn_share: float = 0.5  # candidates that must be turns for a search to rank as a conversation's


DEFAULT_SESSION_PARAMS = SessionParams()


def is_conversation(turns: int, candidates: int, params: SessionParams = DEFAULT_SESSION_PARAMS) -> bool:
    """Whether a search's candidates are mostly conversation turns (then fusion uses
    :data:`node.memory.search.fusion.CONVERSATION_PARAMS`)."""
    return candidates > 0 and turns >= params.turn_share * candidates


def with_sessions(scores: Sequence[tuple[int, float]], session_of: Mapping[int, Hashable],
                  params: SessionParams = DEFAULT_SESSION_PARAMS) -> dict[int, float]:
    """New scores for ``scores`` (``(rowid, score)``, any order), each blended with its session's
    (see the module docstring); ``session_of`` maps a turn's rowid to its session's key.
    Unchanged when no candidate is a turn or ``weight`` is 0."""
    if not scores or params.weight <= 0.0 or not any(rowid in session_of for rowid, _ in scores):
        return dict(scores)
    best = max(score for _, score in scores)
    scale = best if best > 0.0 else 1.0

    def key_of(rowid: int) -> Hashable:
        return session_of.get(rowid, ("crystal", rowid))

    members: dict[Hashable, list[float]] = {}
    for rowid, score in scores:
        members.setdefault(key_of(rowid), []).append(score / scale)
    depth = max(1, params.depth)
    session = {key: sum(sorted(values, reverse=True)[:depth]) for key, values in members.items()}
    session_best = max(session.values())
    session_scale = session_best if session_best > 0.0 else 1.0
    weight = min(1.0, params.weight)
    return {rowid: (1.0 - weight) * score / scale + weight * session[key_of(rowid)] / session_scale
            for rowid, score in scores}
