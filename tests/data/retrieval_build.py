"""Bookkeeping shared by the hand-written held-out retrieval sets (issue 17, stop 20).

Each set lives in ``tests/data/<name>/`` as hand-written ``m*.txt`` / ``q*.txt`` files
and a few-line ``build.py`` that passes a :class:`SetSpec` to :func:`main`.
Memories: ``id | text``. Queries: ``kind | text | id:grade ...`` (2 = answers it,
1 = useful context). Query ids are ``<kind>-<nnn>`` in file order; every query is in
the ``heldout`` split.

Checks (assertions): unique memory ids and texts, every judged id exists, every
query has a grade-2 memory, multi-hop queries have at least two, minimum counts per
kind; a paraphrase query shares no content word (lowercase, stopwords and possessive
's removed, singular/plural forms matched) with any of its grade-2 memories; a
negation-trap query has an unjudged memory sharing at least as many content words
with it as its best answer does (the lexically closer wrong one). It prints the
paraphrase "near" report: words sharing a 5-letter prefix (verify/verification), for
a human to judge.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SetSpec:
    """One hand-written set: its source folder, output JSON, minimums and description."""

    here: Path
    out: Path
    minimum: dict[str, int]
    minimum_memories: int
    description: str


_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few for
    from further get got had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up us
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves ever still also one two much many whose let don didn doesn wasn isn
    weren aren t s m ve ll re d
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def lines(here: Path, pattern: str) -> list[list[str]]:
    """Rows of ``here/pattern`` files split on `` | ``, blank and ``#`` lines skipped."""
    rows = []
    for path in sorted(here.glob(pattern)):
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                rows.append([part.strip() for part in line.split(" | ")])
    return rows


def content_words(text: str) -> set[str]:
    """Lowercase words of ``text`` minus stopwords (a possessive 's is dropped first)."""
    text = re.sub(r"['’]s\b", "", text.lower())
    return {w for w in re.findall(r"[0-9a-zà-ÿµ]+", text) if w not in STOPWORDS}


def forms(word: str) -> set[str]:
    """``word`` and its simple singulars: -ies -> -y, -es -> '', -s -> '' (not after s)."""
    found = {word}
    if word.endswith("ies") and len(word) > 4:
        found.add(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        found.add(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        found.add(word[:-1])
    return found


def shared_words(query: str, memory: str) -> set[str]:
    """Content words of ``query`` that also occur in ``memory``, singular or plural."""
    memory_forms = set().union(*(forms(w) for w in content_words(memory)))
    return {w for w in content_words(query) if forms(w) & memory_forms}


def build(spec: SetSpec) -> tuple[dict[str, Any], list[str]]:
    """The data set and the paraphrase report lines (``near`` prefix matches only)."""
    memories = []
    for row in lines(spec.here, "m*.txt"):
        assert len(row) == 2 and row[0] and row[1], row
        memories.append({"id": row[0], "text": row[1]})
    ids = [m["id"] for m in memories]
    texts = {m["id"]: m["text"] for m in memories}
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert len(texts) == len(set(texts.values())), "two memories with the same text"
    assert len(memories) >= spec.minimum_memories, len(memories)
    counters: Counter[str] = Counter()
    queries = []
    report = []
    overlaps = []
    untrapped = []
    for row in lines(spec.here, "q*.txt"):
        assert len(row) == 3, row
        kind, text, relevant = row
        assert kind in spec.minimum, kind
        query_id = f"{kind}-{counters[kind]:03d}"
        counters[kind] += 1
        grades = {key: int(grade) for key, grade in (item.split(":") for item in relevant.split())}
        assert len(grades) == len(relevant.split()), (query_id, "id judged twice")
        assert set(grades.values()) <= {1, 2}, (query_id, grades)
        missing = set(grades) - set(ids)
        assert not missing, (query_id, text, missing)
        answers = [key for key, grade in grades.items() if grade == 2]
        assert answers, (query_id, text, "no grade-2 memory")
        if kind == "multi-hop":
            assert len(answers) >= 2, (query_id, text, "multi-hop needs two answers")
        if kind == "paraphrase":
            for answer in answers:
                shared = shared_words(text, texts[answer])
                if shared:
                    overlaps.append(f"{query_id} shares {sorted(shared)} with {answer}: {text}")
                near = sorted(
                    f"{q}~{m}"
                    for q in content_words(text)
                    for m in content_words(texts[answer])
                    if len(q) >= 5 and len(m) >= 5 and q[:5] == m[:5]
                )
                if near:
                    report.append(f"{query_id} near {answer}: {' '.join(near)}")
        if kind == "negation-trap":
            best_answer = max(len(shared_words(text, texts[key])) for key in answers)
            best_wrong = max(
                len(shared_words(text, texts[key])) for key in ids if key not in grades
            )
            if best_wrong < best_answer:
                untrapped.append(f"{query_id} answer {best_answer} > wrong {best_wrong}: {text}")
        queries.append(
            {"id": query_id, "kind": kind, "split": "heldout", "text": text, "relevant": grades}
        )
    assert not overlaps, "paraphrase queries sharing a content word:\n" + "\n".join(overlaps)
    assert not untrapped, "negation traps without a lexically closer wrong memory:\n" + "\n".join(
        untrapped
    )
    texts_seen = Counter(q["text"] for q in queries)
    assert all(n == 1 for n in texts_seen.values()), [t for t, n in texts_seen.items() if n > 1]
    short = {kind: counters[kind] for kind in spec.minimum if counters[kind] < spec.minimum[kind]}
    assert not short, short
    data = {
        "description": spec.description,
        "split_rule": "all heldout (never tuned on)",
        "memories": memories,
        "queries": queries,
    }
    return data, report


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(spec: SetSpec) -> None:
    """Build ``spec``, write its JSON and print the report and the counts."""
    data, report = build(spec)
    spec.out.write_text(render(data))
    print("paraphrase overlap: none exact; near (5-letter prefix) matches to judge by hand:")
    for line in report:
        print("  " + line)
    kinds = Counter(q["kind"] for q in data["queries"])
    print(
        len(data["memories"]),
        "memories,",
        len(data["queries"]),
        "queries",
        dict(sorted(kinds.items())),
    )
