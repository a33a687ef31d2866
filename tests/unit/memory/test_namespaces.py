from __future__ import annotations

import pytest

from node.errors import CrystalmeshError
from node.memory.namespaces import DEFAULT_NAMESPACE, InvalidNamespace, validate_namespace


@pytest.mark.parametrize("name", ["default", "user:jonas", "agent:planner", "session:2024-06-01T10.00",
                                  "project:crystal_mesh", "user:jonas@example.org", "team-a"])
def test_valid_names(name: str) -> None:
    assert validate_namespace(name) == name


def test_none_is_the_default() -> None:
    assert validate_namespace(None) == DEFAULT_NAMESPACE == "default"


@pytest.mark.parametrize("name", ["", "User:jonas", "user:", ":jonas", "user:jo nas", "user:../x", "a/b",
                                  "user:jonas:x", "x" * 40, "user:" + "j" * 65, "*", "user:\n", 7, ["a"],
                                  "user:jönas", "default\x00"])
def test_invalid_names_are_refused(name: object) -> None:
    with pytest.raises(InvalidNamespace) as raised:
        validate_namespace(name)
    assert isinstance(raised.value, CrystalmeshError) and raised.value.http_status == 400
