"""The retrieval half of LoCoMo, run through the product's ``Memory`` (scripts/bench_locomo.py).

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", ACL 2024): long two-person conversations, each a file with
``speaker_a``, ``speaker_b``, ``session_N`` (turns: ``speaker``, ``dia_id``,
``text``, photo turns also ``blip_caption``), ``session_N_date_time`` (or only
``events_session_N.date``) and ``qa`` (``question``, ``evidence``: the
``dia_id`` of the supporting turns, ``category``: 1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial).

Every turn is stored as one memory, ``"(<session date>) <speaker>: <text>"``
plus ``" [shares <caption>]"`` for a photo turn (the shape the figures of
issue 28 were measured with), each conversation in a data dir of its own.
Each question is then asked three ways over the same store: ``product``
(``Memory.search``), ``bm25`` (FTS5 only) and ``dense`` (exact cosine over
every stored turn vector, no index). A question's relevant turns are its
evidence (gain 1 each); evidence ids that name no turn (the data has a few
typos) are dropped, and a question left with none is not scored.
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

    def memory_text(self) -> str:
        shares = f" [shares {self.caption}]" if self.caption else ""
        return f"({self.date}) {self.speaker}: {self.text}{shares}"


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


def load(path: Path) -> Conversation:
    """One LoCoMo-shaped file: its turns in order and its questions with evidence among them."""
    data = json.loads(path.read_text())
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
    return Conversation(path.stem, turns, questions)


def ndcg(ranked: list[str], relevant: tuple[str, ...], cutoff: int = DEPTH) -> float:
    wanted = set(relevant)
    gain = sum(1 / math.log2(rank + 2) for rank, dia_id in enumerate(ranked[:cutoff]) if dia_id in wanted)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), cutoff)))
    return gain / ideal


def recall(ranked: list[str], relevant: tuple[str, ...], cutoff: int) -> float:
    return len(set(ranked[:cutoff]) & set(relevant)) / len(relevant)


class LocomoStore:
    """One conversation in a fresh data dir, searched the product's way, by BM25 and by exact cosine."""

    def __init__(self, conversation: Conversation, embedder_name: str, data_dir: Path,
                 second_opinion: str = "auto") -> None:
        config = NodeConfig()
        config.data_dir = data_dir
        config.memory.embedder = embedder_name
        config.memory.second_opinion = second_opinion
        self.memory = Memory(config, embedder=get_embedder(embedder_name))
        texts = [turn.memory_text() for turn in conversation.turns]
        # Packed batches, as conversation ingest embeds (node.memory.conversations.ingest.embed_plan).
        vectors, windows = self.memory.embed_windows(texts, packed=True)
        crystals = [self.memory.prepare(text) for text in texts]
        self.memory.second_opinions(crystals, packed=True)
        results = self.memory.add_crystals(crystals, vectors, windows)
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.dia_ids = [turn.dia_id for turn in conversation.turns]
        self.by_rowid = {result.rowid: turn.dia_id for result, turn in zip(results, conversation.turns, strict=True)}
        self.by_crystal = {result.id: turn.dia_id for result, turn in zip(results, conversation.turns, strict=True)}

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


def evaluate(store: LocomoStore, questions: list[Question],
             scores: dict[tuple[str, str], list[tuple[float, float, float]]]) -> None:
    """Add (recall@5, recall@10, nDCG@10) of each method on each answered question to
    ``scores[(category name, method)]`` and ``scores[("overall", method)]``."""
    for question in questions:
        if question.category not in ANSWERED:
            continue
        for method in METHODS:
            ranked = getattr(store, method)(question.text)
            triple = (recall(ranked, question.evidence, 5), recall(ranked, question.evidence, 10),
                      ndcg(ranked, question.evidence))
            scores[(CATEGORIES[question.category], method)].append(triple)
            scores[("overall", method)].append(triple)


def summarise(scores: dict[tuple[str, str], list[tuple[float, float, float]]]) -> dict[str, Any]:
    report: dict[str, Any] = defaultdict(dict)
    for (category, method), rows in sorted(scores.items()):
        report[category]["n"] = len(rows)
        report[category][method] = {
            "recall@5": round(sum(row[0] for row in rows) / len(rows), 4),
            "recall@10": round(sum(row[1] for row in rows) / len(rows), 4),
            "ndcg@10": round(sum(row[2] for row in rows) / len(rows), 4),
        }
    return dict(report)
