"""Optional LLM stage of search: HyDE and a rerank of the top hits (off by default).

Any OpenAI-compatible ``/chat/completions`` endpoint, set in ``[memory]``:
``llm_url`` (e.g. ``http://127.0.0.1:8080/v1``; empty = off), ``llm_model``,
``llm_hyde``, ``llm_rerank``, ``llm_timeout_s``; the API key, if the endpoint
wants one, only from the environment (``CRYSTALMESH_LLM_API_KEY``) and only in
the ``Authorization`` header.

* **HyDE** (seed 002): the model writes a short passage that would answer the
  query; the dense side searches with ``normalise(v(query) + v(passage))``
  (the lexical side keeps the user's words).
* **Rerank**: the top :data:`RERANK_DEPTH` fused hits go to the model as a
  numbered list; it answers with the numbers best first. Whatever it answers,
  :func:`parse_order` turns it into a permutation (unknown or repeated numbers
  ignored, missing ones kept in fused order).

The endpoint is a boundary this machine cannot run a model behind: it is
tested against a local stub server only (tests/integration/search/test_llm_stage.py),
never against a real model, and its effect on retrieval quality is unmeasured.
A failing, slow or garbled endpoint never fails a search: the stage is skipped
(logged) and the fused ranking returned.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import httpx

from node.config import MemoryConfig
from node.memory.chat import LlmError, chat_completion

if TYPE_CHECKING:
    from node.memory.search.pipeline import SearchHit, SearchRequest

log = logging.getLogger(__name__)

T = TypeVar("T")

API_KEY_ENV = "CRYSTALMESH_LLM_API_KEY"
RERANK_DEPTH = 20
MAX_REPLY_BYTES = 64 * 1024
MAX_PASSAGE_CHARS = 1000
MAX_HIT_CHARS = 500

HYDE_SYSTEM = (
    "You write one short factual passage (2-3 sentences) that would answer the user's "
    "question if it were stored in their personal notes. Output the passage only."
)
RERANK_SYSTEM = (
    "You rank numbered notes by how well they answer the question. Answer with a JSON "
    "list of the note numbers, most useful first, e.g. [3, 1, 2]. Output the list only."
)
_NUMBER = re.compile(r"\d{1,4}")


@dataclass(frozen=True)
class LlmSettings:
    url: str
    model: str
    hyde: bool
    rerank: bool
    timeout_s: float
    api_key: str | None = None

    @classmethod
    def from_config(cls, config: MemoryConfig) -> LlmSettings | None:
        """The stage's settings, or None when it is off (no URL, or neither step asked for)."""
        if not config.llm_url or not (config.llm_hyde or config.llm_rerank):
            return None
        return cls(
            url=config.llm_url.rstrip("/"),
            model=config.llm_model,
            hyde=config.llm_hyde,
            rerank=config.llm_rerank,
            timeout_s=config.llm_timeout_s,
            api_key=os.environ.get(API_KEY_ENV) or None,
        )


def parse_order(reply: str, count: int) -> list[int]:
    """0-based indices of ``count`` items in the order ``reply`` names them (1-based), as a permutation."""
    order: list[int] = []
    seen: set[int] = set()
    for match in _NUMBER.finditer(reply[:MAX_REPLY_BYTES]):
        index = int(match.group(0)) - 1
        if 0 <= index < count and index not in seen:
            seen.add(index)
            order.append(index)
    return order + [index for index in range(count) if index not in seen]


def rerank_prompt(query: str, texts: Sequence[str]) -> str:
    notes = "\n".join(
        f"{number}. {' '.join(text.split())[:MAX_HIT_CHARS]}"
        for number, text in enumerate(texts, start=1)
    )
    return f"Question: {query}\n\nNotes:\n{notes}"


class LlmStage:
    """One endpoint, used synchronously (call it off the database thread)."""

    def __init__(self, settings: LlmSettings, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            timeout=settings.timeout_s, headers=headers, transport=transport, follow_redirects=False
        )

    def close(self) -> None:
        self._client.close()

    def complete(self, system: str, user: str, max_tokens: int) -> str:
        """The model's reply to one chat turn; :class:`LlmError` on anything unusable."""
        body = {
            "model": self.settings.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        return chat_completion(self._client, f"{self.settings.url}/chat/completions", body,
                               MAX_REPLY_BYTES)

    def expand(self, query: str) -> str | None:
        """A HyDE passage for ``query``, or None (step off, or the endpoint failed)."""
        if not self.settings.hyde:
            return None
        try:
            passage = self.complete(HYDE_SYSTEM, query, max_tokens=160).strip()
        except LlmError as exc:
            log.warning("llm_hyde_skipped reason=%s", exc)
            return None
        return passage[:MAX_PASSAGE_CHARS] or None

    def rerank(self, query: str, hits: list[T], text: Callable[[T], str]) -> list[T]:
        """``hits`` with the first :data:`RERANK_DEPTH` in the model's order (unchanged on failure)."""
        head = hits[:RERANK_DEPTH]
        if not self.settings.rerank or len(head) < 2:
            return hits
        try:
            reply = self.complete(
                RERANK_SYSTEM, rerank_prompt(query, [text(hit) for hit in head]), max_tokens=120
            )
        except LlmError as exc:
            log.warning("llm_rerank_skipped reason=%s", exc)
            return hits
        return [head[index] for index in parse_order(reply, len(head))] + hits[RERANK_DEPTH:]


@dataclass(frozen=True)
class Step:
    """One step of the LLM branch of search: a call, and whether it waits on the network
    (the endpoint) or on the database (the single writer)."""

    call: Callable[[], object]
    on_network: bool


class CandidateSource(Protocol):
    """What the LLM branch needs from memory (``node.memory.facade.Memory`` is one)."""

    def search_candidates(self, request: SearchRequest, expansion: str | None) -> list[SearchHit]: ...
    def record_hits(self, hits: list[SearchHit]) -> None: ...


def llm_search_steps(memory: CandidateSource, llm: LlmStage,
                     request: SearchRequest) -> Generator[Step, object, list[SearchHit]]:
    """The LLM branch of search, written once: HyDE, the fused candidates, the rerank, access.

    It does no I/O itself: it yields each call as a :class:`Step` and is sent the result,
    so the sync facade runs the steps inline (:func:`run_steps`) and the trio face runs
    network steps on a worker thread and store steps on the database's writer (as httpx's
    ``BaseClient`` serves both ``Client`` and ``AsyncClient``).
    """
    expansion = yield Step(partial(llm.expand, request.query), on_network=True)
    hits = yield Step(partial(memory.search_candidates, request, cast("str | None", expansion)),
                      on_network=False)
    reranked = yield Step(partial(llm.rerank, request.query, cast("list[SearchHit]", hits), _hit_text),
                          on_network=True)
    top = cast("list[SearchHit]", reranked)[: request.k]
    if request.record_access:
        yield Step(partial(memory.record_hits, top), on_network=False)
    return top


def run_steps(steps: Generator[Step, object, list[SearchHit]]) -> list[SearchHit]:
    """Drive :func:`llm_search_steps` synchronously (the caller's thread does everything)."""
    result: object = None
    try:
        while True:
            result = steps.send(result).call()
    except StopIteration as done:
        return cast("list[SearchHit]", done.value)


def _hit_text(hit: SearchHit) -> str:
    return hit.crystal.text
