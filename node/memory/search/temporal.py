"""Temporal validity: which version of a memory held at a given time (seed 004).

Seed 004's node schema: ``validFrom: datetime, // Temporal validity start`` and
``validTo: datetime // null for current version``. An update closes the old
version (sets its ``valid_to_ms``) instead of deleting it, so the past stays
answerable: :func:`valid_at` is the filter of a search "as of" a time.
"""

from __future__ import annotations


def valid_at(
    valid_from_ms: int | None, valid_to_ms: int | None, deleted_at_ms: int | None, at_ms: int
) -> bool:
    """True if a version was the valid one at ``at_ms``: ``valid_from ≤ at < valid_to`` (open ends).

    A version deleted (tombstoned) at or before ``at_ms`` is not valid then; one
    deleted later still was.
    """
    if valid_from_ms is not None and at_ms < valid_from_ms:
        return False
    if valid_to_ms is not None and at_ms >= valid_to_ms:
        return False
    return deleted_at_ms is None or at_ms < deleted_at_ms


def as_of_sql(alias: str = "c") -> str:
    """The same rule as :func:`valid_at` as an SQL condition with three ``?`` for ``at_ms``."""
    return (
        f"({alias}.valid_from_ms IS NULL OR {alias}.valid_from_ms <= ?) "
        f"AND ({alias}.valid_to_ms IS NULL OR {alias}.valid_to_ms > ?) "
        f"AND ({alias}.deleted_at_ms IS NULL OR {alias}.deleted_at_ms > ?)"
    )
