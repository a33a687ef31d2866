"""The typed doors of the local API: one search request model for every caller.

``SearchIn`` is what the route validates, what ``ApiClient.memory_search`` sends and
what the CLI without a node answers (``LocalNode``); ``to_request`` is the one mapping
onto the memory's ``SearchRequest``.
"""

from __future__ import annotations

import pytest

from node.api import SearchIn
from node.errors import CrystalmeshError
from node.memory import SearchRequest


def test_what_a_client_sends_is_what_the_route_reads() -> None:
    sent = SearchIn.unchecked("deploy checklist", 5, types=("fact", "skill"), namespace="user:ana",
                              sources=["files"], min_relevance=0.25, as_of_ms=None)
    body = sent.wire()
    assert body == {"query": "deploy checklist", "k": 5, "types": ["fact", "skill"],
                    "namespace": "user:ana", "sources": ["files"], "min_relevance": 0.25}
    received = SearchIn.model_validate(body)  # as FastAPI validates the route's body
    assert received.to_request() == sent.to_request() == SearchRequest(
        "deploy checklist", 5, ("fact", "skill"), namespaces=("user:ana",), min_relevance=0.25,
        sources=("files",))


def test_defaults_are_left_off_the_wire_and_all_namespaces_means_none_named() -> None:
    assert SearchIn.unchecked("q").wire() == {"query": "q", "k": 10}
    request = SearchIn.unchecked("q", all_namespaces=True, namespace="user:ana").to_request()
    assert request.namespaces == ()


def test_a_misspelt_filter_is_refused_not_dropped() -> None:
    with pytest.raises(TypeError, match="unknown search filter"):
        SearchIn.unchecked("q", typez=("fact",))


def test_a_bad_namespace_is_refused_before_any_search() -> None:
    with pytest.raises(CrystalmeshError, match="is not a namespace"):
        SearchIn.unchecked("q", namespace="../etc").to_request()
