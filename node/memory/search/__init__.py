"""Everything a query passes through: candidates, fusion, lexical, negation, compound, windows, second opinion, LLM stage.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.search.fusion import STOPWORDS as STOPWORDS
    from node.memory.search.fusion import is_identifier as is_identifier
    from node.memory.search.fusion import query_tokens as query_tokens
    from node.memory.search.llm_stage import RERANK_DEPTH as RERANK_DEPTH
    from node.memory.search.llm_stage import LlmSettings as LlmSettings
    from node.memory.search.llm_stage import LlmStage as LlmStage
    from node.memory.search.llm_stage import llm_search_steps as llm_search_steps
    from node.memory.search.llm_stage import run_steps as run_steps
    from node.memory.search.origin import origin_label as origin_label
    from node.memory.search.origin import origin_of as origin_of
    from node.memory.search.pipeline import SOURCES as SOURCES
    from node.memory.search.pipeline import MemoryInputError as MemoryInputError
    from node.memory.search.pipeline import SearchHit as SearchHit
    from node.memory.search.pipeline import SearchRequest as SearchRequest
    from node.memory.search.pipeline import record_hits as record_hits
    from node.memory.search.pipeline import search as search
    from node.memory.search.pipeline import search_request as search_request
    from node.memory.search.second_opinion import give_opinions as give_opinions
    from node.memory.search.second_opinion import open_second_opinion as open_second_opinion
    from node.memory.search.second_opinion import opinion_status as opinion_status
    from node.memory.search.second_opinion import second_name as second_name
    from node.memory.search.windows import set_vectors as set_vectors

__getattr__ = face(__name__)
