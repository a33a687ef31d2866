"""The retrieval half of LoCoMo, run through the product's ``Memory`` (scripts/bench_locomo.py).

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", ACL 2024): long two-person conversations, each a file with
``speaker_a``, ``speaker_b``, ``session_N`` (turns: ``speaker``, ``dia_id``,
``text``, photo turns also ``blip_caption``), ``session_N_date_time`` (or only
``events_session_N.date``) and ``qa`` (``question``, ``evidence``: the
``dia_id`` of the supporting turns, ``category``: 1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial).

Each conversation file goes into a data dir of its own the way a user stores
one (``memory ingest --conversation``: :func:`node.memory.conversations.ingest_conversation`):
every turn one memory, ``"(<session date>) <speaker>: <text>"`` plus
``" [shares <caption>]"`` for a photo turn and the resolved relative dates, with
its row in ``conversation_turns`` (so search knows each turn's session).
Each question is then asked three ways over the same store: ``product``
(``Memory.search``), ``bm25`` (FTS5 only) and ``dense`` (exact cosine over
every stored turn vector, no index). A question's relevant turns are its
evidence (gain 1 each); evidence ids that name no turn (the data has a few
typos) are dropped, and a question left with none is not scored.

Turn level: recall@5, recall@10, nDCG@10. Session level (as arXiv 2606.04194
scores LoCoMo): the sessions of a method's top 10 turns, deduplicated in rank
order; Hit@1 is whether the first is a session holding evidence, Hit@5 whether
any of the first five is.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from node.config import NodeConfig
from node.memory.conversations import ingest_conversation
from node.memory.embedding.embedder import get_embedder
from node.memory.facade import Memory, SearchRequest
from node.memory.search.fusion import fts_query

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERED = (1, 2, 3, 4)  # category 5's evidence is where the tempting wrong answer is
METHODS = ("bm25", "dense", "product")
DEPTH = 10
_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    date: str
    speaker: str
    text: str
    caption: str | None


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    data: bytes = b""


def load(path: Path) -> Conversation:
    """One LoCoMo-shaped file: its turns in order and its questions with evidence among them."""
    raw = path.read_bytes()
    data = json.loads(raw)
    turns: list[Turn] = []
    sessions = sorted(int(match.group(1)) for key in data if (match := _SESSION.fullmatch(key)))
    for session in sessions:
        date = data.get(f"session_{session}_date_time") or data.get(f"events_session_{session}", {}).get("date", "")
        for turn in data[f"session_{session}"]:
            turns.append(Turn(turn["dia_id"], session, date, turn["speaker"], turn["text"],
                              turn.get("blip_caption")))
    known = {turn.dia_id for turn in turns}
    questions = []
    for qa in data.get("qa", []):
        evidence = tuple(dict.fromkeys(
            f"D{match.group(1)}:{match.group(2)}" for item in qa.get("evidence", [])
            for match in _EVIDENCE.finditer(item)))
        evidence = tuple(dia_id for dia_id in evidence if dia_id in known)
        if evidence:
            questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return Conversation(path.stem, turns, questions, raw)


def ndcg(ranked: list[str], relevant: tuple[str, ...], cutoff: int = DEPTH) -> float:
    wanted = set(relevant)
    gain = sum(1 / math.log2(rank + 2) for rank, dia_id in enumerate(ranked[:cutoff]) if dia_id in wanted)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), cutoff)))
    return gain / ideal


def recall(ranked: list[str], relevant: tuple[str, ...], cutoff: int) -> float:
    return len(set(ranked[:cutoff]) & set(relevant)) / len(relevant)


def session_of(dia_id: str) -> str:
    """LoCoMo's ``dia_id`` ``D<session>:<turn>`` names its session."""
    return dia_id.split(":", 1)[0]


def session_hit(ranked: list[str], relevant: tuple[str, ...], cutoff: int) -> float:
    """1.0 if one of the first ``cutoff`` distinct sessions of ``ranked`` (in rank order) holds evidence."""
    sessions = list(dict.fromkeys(session_of(dia_id) for dia_id in ranked))
    return float(bool(set(sessions[:cutoff]) & {session_of(dia_id) for dia_id in relevant}))


class LocomoStore:
    """One conversation in a fresh data dir, searched the product's way, by BM25 and by exact cosine."""

    def __init__(self, conversation: Conversation, embedder_name: str, data_dir: Path,
                 second_opinion: str = "auto") -> None:
        config = NodeConfig()
        config.data_dir = data_dir
        config.memory.embedder = embedder_name
        config.memory.second_opinion = second_opinion
        self.memory = Memory(config, embedder=get_embedder(embedder_name))
        ingest_conversation(self.memory, conversation.data)
        # A turn whose text repeats an earlier one's is one memory: it answers as the earliest turn.
        rows = self.memory.db.all(
            "SELECT c.rowid AS rowid, t.crystal_id AS id, t.source_id AS dia_id, c.embedding AS embedding "
            "FROM conversation_turns t JOIN crystals c ON c.id = t.crystal_id "
            "ORDER BY t.session_index DESC, t.turn_index DESC")
        self.by_rowid = {row["rowid"]: row["dia_id"] for row in rows}
        self.by_crystal = {row["id"]: row["dia_id"] for row in rows}
        vectors = {row["rowid"]: np.frombuffer(row["embedding"], dtype=np.float32) for row in rows}
        self.dia_ids = [self.by_rowid[rowid] for rowid in vectors]
        self.vectors = np.vstack(list(vectors.values()))

    def close(self) -> None:
        self.memory.close()

    def product_hits(self, question: str, k: int = DEPTH, min_relevance: float = 0.0) -> list[Any]:
        return self.memory.search(SearchRequest(query=question, k=k, record_access=False,
                                                min_relevance=min_relevance))

    def product(self, question: str, k: int = DEPTH) -> list[str]:
        return [self.by_crystal[hit.crystal.id] for hit in self.product_hits(question, k)]

    def bm25(self, question: str, k: int = DEPTH) -> list[str]:
        return [self.by_rowid[rowid] for rowid, _ in self.memory.store.fts(fts_query(question), k)]

    def dense(self, question: str, k: int = DEPTH) -> list[str]:
        scores = self.vectors @ np.asarray(self.memory.embed([question])[0], dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.dia_ids[i] for i in order]


MEASURES = ("recall@5", "recall@10", "ndcg@10", "session_hit@1", "session_hit@5")
Scores = dict[tuple[str, str], list[tuple[float, ...]]]


def measure(ranked: list[str], evidence: tuple[str, ...]) -> tuple[float, ...]:
    """The :data:`MEASURES` of one ranked list of ``dia_id``s against a question's evidence."""
    return (recall(ranked, evidence, 5), recall(ranked, evidence, 10), ndcg(ranked, evidence),
            session_hit(ranked, evidence, 1), session_hit(ranked, evidence, 5))


def evaluate(store: LocomoStore, questions: list[Question], scores: Scores) -> None:
    """Add the :data:`MEASURES` of each method on each question to ``scores[(category name, method)]``
    and, for an answered one (categories 1-4), to ``scores[("overall", method)]``. A category-5
    (adversarial) question's evidence is where the tempting wrong answer is: reported apart, it
    says whether the product finds what BM25 finds there, not whether it answers."""
    for question in questions:
        for method in METHODS:
            row = measure(getattr(store, method)(question.text), question.evidence)
            scores[(CATEGORIES[question.category], method)].append(row)
            if question.category in ANSWERED:
                scores[("overall", method)].append(row)


def summarise(scores: Scores) -> dict[str, Any]:
    report: dict[str, Any] = defaultdict(dict)
    for (category, method), rows in sorted(scores.items()):
        report[category]["n"] = len(rows)
        report[category][method] = {
            name: round(sum(row[index] for row in rows) / len(rows), 4) for index, name in enumerate(MEASURES)}
    return dict(report)
