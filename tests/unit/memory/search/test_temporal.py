"""Temporal validity (seed 004: validFrom / validTo, null for the current version)."""

from __future__ import annotations

import sqlite3

import pytest

from node.memory.search.temporal import as_of_sql, valid_at


@pytest.mark.parametrize(
    ("valid_from", "valid_to", "deleted", "at", "expected"),
    [
        (100, None, None, 100, True),  # the current version, from its start
        (100, None, None, 99, False),  # not yet written
        (100, 200, None, 199, True),  # the old version before the update
        (100, 200, None, 200, False),  # closed by the update at 200
        (200, None, None, 200, True),  # the new version from 200
        (100, None, 300, 299, True),  # deleted later: still valid then
        (100, None, 300, 300, False),  # deleted at 300
        (None, None, None, 0, True),
    ],
)
def test_valid_at(valid_from: int | None, valid_to: int | None, deleted: int | None, at: int, expected: bool) -> None:
    assert valid_at(valid_from, valid_to, deleted, at) is expected
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE c (valid_from_ms, valid_to_ms, deleted_at_ms)")
    conn.execute("INSERT INTO c VALUES (?, ?, ?)", (valid_from, valid_to, deleted))
    count = conn.execute(f"SELECT COUNT(*) FROM c WHERE {as_of_sql()}", (at, at, at)).fetchone()[0]
    assert bool(count) is expected
