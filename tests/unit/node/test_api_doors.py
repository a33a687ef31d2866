"""The typed doors of the local API: one search request model for every caller, and one
shape per answer that the OpenAPI schema shows and that never changes what a route returns.

``SearchIn`` is what the route validates, what ``ApiClient.memory_search`` sends and
what the CLI without a node answers (``LocalNode``); ``to_request`` is the one mapping
onto the memory's ``SearchRequest``.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import TypeAdapter, ValidationError

from node.api import SearchIn, build_app, shapes
from node.errors import CrystalmeshError
from node.market.book.listings import StoredListing
from node.market.ledger import Purchase, Sale
from node.memory import SearchRequest
from tests.fixtures.messages import SELLER, sample_listing


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


# --- the answers' shapes (node.api.shapes) ------------------------------------------------------

def unchanged_by(shape: type, value: dict[str, Any]) -> bool:
    """What FastAPI does to a route's answer under ``response_model=shape`` leaves it as it was:
    no key dropped or added, no number turned from int to float, nothing refused."""
    adapter: TypeAdapter[Any] = TypeAdapter(shape)
    served = adapter.dump_python(adapter.validate_python(value), mode="json")
    return json.dumps(served, sort_keys=True) == json.dumps(value, sort_keys=True)


def test_the_market_shapes_serve_what_the_ledger_and_the_book_hold() -> None:
    listing = StoredListing(sample_listing(), SELLER.public_key, 1, 2, None, "crystal-1", b"", None)
    assert unchanged_by(shapes.Listing, listing.to_dict() | {"a_key_no_shape_names": [1, 2.5]})
    assert unchanged_by(shapes.Listings, {"listings": [listing.to_dict()]})
    purchase = Purchase("r1", "l1", "ab" * 32, "Parse logs", 10_000, "0x" + "1" * 40, None, "completed",
                        "0x" + "2" * 64, "crystal-2", None, 1, 2, payload="quarantined text")
    assert unchanged_by(shapes.Purchases, {"purchases": [purchase.to_dict()]})
    sale = Sale("r1", "l1", "crystal-1", "skill-parse-logs", "cd" * 32, "0x" + "3" * 40, 10_000, None,
                "settled", None, None, 1, 2)
    assert unchanged_by(shapes.Sales, {"sales": [sale.to_dict()]})


def test_a_shape_refuses_an_answer_of_the_wrong_type() -> None:
    """The check runs: a route answering a string price would be a 500, not a silent lie."""
    listing = StoredListing(sample_listing(), SELLER.public_key, 1, 2, None, None, b"", None).to_dict()
    with pytest.raises(ValidationError):
        TypeAdapter(shapes.Listing).validate_python(listing | {"price_micro_usdc": "free"})


def test_the_openapi_schema_names_the_answers() -> None:
    app = build_app(cast(Any, object()), "t" * 32)
    spec = app.fastapi.openapi()
    for shape in shapes.SHAPES:
        assert shape.__name__ in spec["components"]["schemas"], shape.__name__

    def answer(method: str, path: str) -> Any:
        return spec["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]

    assert answer("post", "/v1/crystals/search") == {"$ref": "#/components/schemas/Hits"}
    assert answer("get", "/v1/listings") == {"$ref": "#/components/schemas/Listings"}
    assert answer("get", "/v1/status") == {"$ref": "#/components/schemas/Status"}
    hit = spec["components"]["schemas"]["Hit"]
    assert hit["additionalProperties"] is True  # never drops a key a route returned
    assert hit["properties"]["crystal"] == {"$ref": "#/components/schemas/Crystal"}
