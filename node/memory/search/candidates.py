"""Which search candidates a request may see, decided on light rows (no JSON, no vector).

``Memory.search`` filters and ranks up to a few hundred candidates per query;
parsing each into a :class:`~node.crystals.model.Crystal` (three ``json.loads``
and the enums) cost more than the search itself at 100k crystals. The checks
here read the plain columns of :class:`node.crystals.reads.SearchRow`
instead, with the same rules as the parsed crystal
(:meth:`Crystal.is_current`, :func:`node.memory.search.pipeline.valid_then`, the
namespace/type/lifecycle/scope filters and :func:`governance.can_access`); only
the final top k are parsed, and checked again on the parsed crystal.

The lexical side ranks FTS5 unfiltered (no join into the wide crystal rows,
which made the namespace/current filter scan) and keeps the allowed rows of
that list; when too few survive (a small namespace beside a big one, many
superseded versions), it asks deeper, then falls back to the joined query, so
the result is always the top of the filtered ranking. When the nearest dense
candidates already show the asked crystals to be rare, the joined query is
asked first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from node.crystals import CrystalStore, Filters, SearchRow
from node.crystals import governance as gov
from node.memory.search.temporal import valid_at

DEEPER = 4
"""How much deeper the unfiltered FTS5 list is read before the joined query is used."""
MIN_CHUNK = 10
"""Fewest unfiltered candidates whose rows are fetched at a time, after the first ``limit``."""


@dataclass
class Visibility:
    """The filters of one search request, as tests on a :class:`SearchRow`."""

    namespaces: frozenset[str]  # empty: every namespace
    semantic_types: frozenset[str]  # empty: every type
    lifecycles: frozenset[str]
    scopes: frozenset[str]  # empty: every scope
    requester: str
    now_ms: int
    as_of_ms: int | None = None
    sources: frozenset[str] = frozenset()  # empty: every source (memory, sessions, files, skills)
    _access: dict[tuple[str, str], bool] = field(default_factory=dict)

    def listed(self, row: SearchRow) -> bool:
        """What the index side keeps: the asked namespaces and sources, and current now unless
        ``as_of``. The source is a listing rule, not only a final check: a search of one source
        then walks the index and BM25 among that source's crystals and still fills its k."""
        if self.namespaces and row.namespace not in self.namespaces:
            return False
        if self.sources and row.source not in self.sources:
            return False
        return self.as_of_ms is not None or self.current(row)

    def current(self, row: SearchRow) -> bool:
        """:meth:`Crystal.is_current` at the request's time."""
        expires = row.expires_at_ms
        return (row.valid_to_ms is None and row.deleted_at_ms is None
                and (expires is None or expires > self.now_ms))

    def valid_then(self, row: SearchRow, at_ms: int) -> bool:
        """:func:`node.memory.search.pipeline.valid_then` (a missing ``valid_from`` is ``created_at``)."""
        valid_from = row.created_at_ms if row.valid_from_ms is None else row.valid_from_ms
        expires = row.expires_at_ms
        return valid_at(valid_from, row.valid_to_ms, row.deleted_at_ms, at_ms) and (
            expires is None or expires > at_ms)

    def visible(self, row: SearchRow) -> bool:
        """Every filter of the request: time, namespace, source, type, lifecycle, scope, governance."""
        if not (self.current(row) if self.as_of_ms is None else self.valid_then(row, self.as_of_ms)):
            return False
        if self.namespaces and row.namespace not in self.namespaces:
            return False
        if self.sources and row.source not in self.sources:
            return False
        if self.semantic_types and row.semantic_type not in self.semantic_types:
            return False
        if row.lifecycle not in self.lifecycles:
            return False
        if self.scopes and row.access_scope not in self.scopes:
            return False
        return self.can_access(row.access_scope, row.lifecycle)

    def can_access(self, scope: str, lifecycle: str) -> bool:
        """:func:`governance.can_access` for the requester, once per (scope, lifecycle)."""
        key = (scope, lifecycle)
        allowed = self._access.get(key)
        if allowed is None:
            try:
                allowed = gov.can_access(scope, lifecycle, self.requester)
            except ValueError:  # a scope or lifecycle no crystal can have: a crafted row
                allowed = False
            self._access[key] = allowed
        return allowed

    def index_filters(self) -> Filters:
        """The same "listed" rule as SQL, for the joined FTS5 query."""
        return Filters(namespaces=tuple(sorted(self.namespaces)), sources=tuple(sorted(self.sources)),
                       current_at_ms=self.now_ms if self.as_of_ms is None else None)


class Rows:
    """Light rows of the candidates met so far, fetched in as few queries as possible."""

    def __init__(self, store: CrystalStore) -> None:
        self.store = store
        self.by_rowid: dict[int, SearchRow] = {}

    def fetch(self, rowids: Iterable[int]) -> None:
        missing = [rowid for rowid in dict.fromkeys(rowids) if rowid not in self.by_rowid]
        if missing:
            self.by_rowid.update(self.store.search_rows(missing))

    def keep(self, ranked: list[tuple[int, float]], test: Callable[[SearchRow], bool]) -> list[tuple[int, float]]:
        """The items of ``ranked`` whose row exists and passes ``test``, in order."""
        by_rowid = self.by_rowid
        return [(rowid, score) for rowid, score in ranked
                if (row := by_rowid.get(rowid)) is not None and test(row)]


def sparse(rows: Rows, nearest: list[tuple[int, float]], visibility: Visibility) -> bool:
    """Whether the listed crystals are rare among the ``nearest`` dense candidates (rows fetched).

    Then few of an unfiltered BM25 list would survive either (a small namespace
    beside a big one), and :func:`lexical_candidates` goes straight to the joined query.
    Only the cost depends on this guess, never the answer.
    """
    return bool(nearest) and len(rows.keep(nearest, visibility.listed)) * DEEPER < len(nearest)


def lexical_candidates(
    store: CrystalStore, rows: Rows, match: str, limit: int, visibility: Visibility, joined_first: bool,
) -> list[tuple[int, float]]:
    """The BM25 top ``limit`` among the listed crystals (what ``store.fts`` with the filters gives).

    The unfiltered ranking is read ``2 × limit`` deep (then ``DEEPER × limit``
    when the survivors so far promise to fill the list) and its rows are fetched
    a chunk at a time, only as many as are still missing: a filtered prefix of
    the unfiltered ranking is the filtered ranking's prefix, so it is the answer
    once it holds ``limit`` items or the ranking is exhausted. Otherwise, or with
    ``joined_first``, the joined query answers.
    """
    if not joined_first:
        kept: list[tuple[int, float]] = []
        seen = 0
        for depth in (2 * limit, DEEPER * limit):
            found = store.fts(match, depth)
            while seen < len(found) and len(kept) < limit:
                chunk = found[seen : seen + max(limit - len(kept), MIN_CHUNK)]
                rows.fetch(rowid for rowid, _ in chunk)
                kept += rows.keep(chunk, visibility.listed)
                seen += len(chunk)
            if len(kept) >= limit or len(found) < depth:
                return kept[:limit]
            if len(kept) * DEEPER < seen:
                break
    joined = store.fts(match, limit, visibility.index_filters())
    rows.fetch(rowid for rowid, _ in joined)
    return joined


__all__ = ["DEEPER", "Rows", "Visibility", "lexical_candidates", "sparse"]
