"""The export summary a node sends in a header (``ApiClient.memory_export``): read as hostile input."""

from __future__ import annotations

import pytest

from node.api import ApiError
from node.api.client import _export_summary


def test_the_summary_is_read_as_the_node_wrote_it() -> None:
    assert _export_summary('{"crystals":3,"by_namespace":{"default":3}}') == {
        "crystals": 3, "by_namespace": {"default": 3}}


@pytest.mark.parametrize("header", ["[" * 5000 + "]" * 5000, '{"a":' * 20 + "1" + "}" * 20,
                                    "x" * 20_000, "[1, 2]", '"text"'])
def test_a_deep_oversized_or_shapeless_summary_is_one_clear_error(header: str) -> None:
    with pytest.raises(ApiError, match="export summary"):
        _export_summary(header)
