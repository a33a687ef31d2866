"""Search filters and ranks on light rows, FTS5 unfiltered first: the same answers as the full filter.

A real data dir (SQLite + FTS5 + HNSW, hashing embedder) holds a big namespace
beside a tiny one, superseded versions, a tombstone, an expired TTL, an
archived crystal, warnings, private and public scopes and a knowledge row
(confidence). Every request is answered by ``Memory.search`` and by main's
search before the light rows (``tests/support/search_baseline.py``: FTS5 joined
with the namespace/current filter, every candidate parsed into a crystal and
filtered there): ids, order and scores must match. The light-row predicates
are also checked row by row against the parsed crystals.
"""

from __future__ import annotations

import pytest

from node.crystals import governance as gov
from node.crystals.model import AccessScope, Crystal, SemanticType, now_ms
from node.memory import versions
from node.memory.facade import Memory, SearchRequest
from node.memory.search import pipeline as search_module
from node.memory.search.candidates import DEEPER, Rows, Visibility, lexical_candidates
from node.memory.search.fusion import fts_query
from node.memory.search.pipeline import valid_then
from tests.support import search_baseline

HOUR = 3600 * 1000
BIG = 260  # > DEEPER * 50 matches of "harbor": the tiny namespace needs the joined query
TINY = "user:tiny"


def aged(memory: Memory, text: str, age_ms: int, **kwargs: object) -> Crystal:
    """A crystal created ``age_ms`` ago (its validity and TTL start then)."""
    crystal = memory.prepare(text, **kwargs)  # type: ignore[arg-type]
    crystal.created_at_ms = crystal.valid_from_ms = now_ms() - age_ms
    memory.add_crystals([crystal])
    return crystal


@pytest.fixture
def world(memory: Memory) -> dict[str, Crystal]:
    assert BIG > DEEPER * 50
    named: dict[str, Crystal] = {}
    for number in range(BIG):
        aged(memory, f"harbor crane {number} lifts container batch {number % 17} at dock {number % 5}",
             2 * HOUR, semantic_type=SemanticType.WARNING if number % 41 == 0 else SemanticType.FACT,
             scope=AccessScope.PRIVATE if number % 3 == 0 else AccessScope.PUBLIC)
    named["tiny"] = aged(memory, "harbor pilot boards the tanker at dawn", 2 * HOUR, namespace=TINY,
                         scope=AccessScope.PUBLIC)
    aged(memory, "harbor tug ERR-4091 lost its radio", 2 * HOUR, namespace=TINY)
    named["old"] = aged(memory, "harbor gate code is 4412", 2 * HOUR, scope=AccessScope.PUBLIC)
    named["new"] = versions.update(memory, named["old"].id, "harbor gate code is 9921 since the audit")
    named["gone"] = aged(memory, "harbor night shift roster for the crane crew", 2 * HOUR)
    versions.delete(memory, named["gone"].id)
    named["ttl"] = aged(memory, "harbor visitor badge ERR-4091 valid for one day", 2 * HOUR, ttl_ms=HOUR)
    named["archived"] = aged(memory, "harbor crane manual from the old owner", 2 * HOUR)
    memory.store.update_fields(named["archived"].id, "test", lifecycle="archived")
    named["doubted"] = aged(memory, "harbor crane 7 has a cracked boom", HOUR)
    memory.learning.feedback(named["doubted"].id, "wrong")
    return named


REQUESTS = [
    {},
    {"namespaces": (TINY,)},
    {"namespaces": ("default", TINY)},
    {"namespaces": ()},
    {"namespaces": ("nobody",)},
    {"requester": gov.Requester.PEER.value},
    {"requester": gov.Requester.PEER.value, "namespaces": (TINY,)},
    {"semantic_types": ("warning",)},
    {"scopes": ("private",)},
    {"lifecycles": ("archived", "generated")},
    {"k": 3},
    {"k": 40},
]
QUERIES = ["harbor crane", "harbor", "gate code", "ERR-4091 badge", "tanker pilot at dawn",
           "which crane lifts the container batch 3, and at which dock", "roster crew night"]


def test_search_equals_the_full_filter_for_every_request(
    memory: Memory, world: dict[str, Crystal], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = search_baseline
    old_search = old.baseline_search
    frozen = now_ms()  # one "now" for both searches, so that recency weights agree to the bit
    monkeypatch.setattr(search_module, "now_ms", lambda: frozen)
    monkeypatch.setattr(old, "now_ms", lambda: frozen)
    as_of = world["new"].created_at_ms - 1  # the first version of the gate code still held then
    compared = 0
    for query in QUERIES:
        for extra in [*REQUESTS, {"as_of_ms": as_of}, {"as_of_ms": as_of, "namespaces": (TINY,)},
                      {"as_of_ms": now_ms() - 3 * HOUR}, {"as_of_ms": now_ms()}]:
            request = SearchRequest(query=query, record_access=False, **extra)  # type: ignore[arg-type]
            fast = memory.search(request)
            full = old_search(memory.store, memory.index, memory.embed, memory.hormones, request,
                              memory.learning.confidences)
            assert [(hit.crystal.id, hit.score, hit.dense, hit.lexical) for hit in fast] == [
                (hit.crystal.id, hit.score, hit.dense, hit.lexical) for hit in full], (query, extra)
            assert [hit.crystal.to_dict() for hit in fast] == [hit.crystal.to_dict() for hit in full]
            compared += 1
    assert compared == len(QUERIES) * (len(REQUESTS) + 4)

    # The cases the comparison is meant to cover did happen.
    def found(query: str, **extra: object) -> list[str]:
        request = SearchRequest(query=query, record_access=False, **extra)  # type: ignore[arg-type]
        return [hit.crystal.id for hit in memory.search(request)]

    assert world["tiny"].id in found("harbor", namespaces=(TINY,))  # beside 260 bigger matches
    assert world["new"].id in found("gate code") and world["old"].id not in found("gate code")
    assert world["old"].id in found("gate code", as_of_ms=as_of)
    assert world["gone"].id not in found("roster crew night")
    assert world["gone"].id in found("roster crew night", as_of_ms=as_of)  # deleted after that
    assert world["gone"].id not in found("roster crew night", as_of_ms=now_ms())
    assert world["ttl"].id not in found("ERR-4091 badge")
    assert world["archived"].id not in found("crane manual old owner")


def test_lexical_candidates_equal_the_joined_query(memory: Memory, world: dict[str, Crystal]) -> None:
    now = now_ms()
    fallbacks = 0
    for query in QUERIES:
        match = fts_query(query)
        for namespaces in [("default",), (TINY,), ("default", TINY), (), ("nobody",)]:
            for as_of in (None, world["new"].created_at_ms - 1):
                visibility = Visibility(frozenset(namespaces), frozenset(), frozenset({"generated"}),
                                        frozenset(), gov.Requester.LOCAL_AGENT.value, now, as_of)
                for limit in (5, 50):
                    joined = memory.store.fts(match, limit, visibility.index_filters())
                    for joined_first in (False, True):  # the guess only changes the cost
                        rows = Rows(memory.store)
                        assert lexical_candidates(memory.store, rows, match, limit, visibility,
                                                  joined_first) == joined, (query, namespaces, as_of, limit)
                    deep = memory.store.fts(match, limit * DEEPER)
                    rows.fetch(rowid for rowid, _ in deep)
                    fallbacks += len(deep) == limit * DEEPER and len(rows.keep(deep, visibility.listed)) < limit
    assert fallbacks  # the joined query was needed at least once (the tiny namespace)


def test_light_row_predicates_agree_with_parsed_crystals(memory: Memory, world: dict[str, Crystal]) -> None:
    rowids = [row[0] for row in memory.store.db.all("SELECT rowid FROM crystals")]
    rows = memory.store.search_rows(rowids)
    crystals = memory.store.get_by_rowids(rowids)
    now = now_ms()
    moments = [None, world["new"].created_at_ms - 1, now - 3 * HOUR, now - HOUR // 2, now]
    for namespaces in [("default",), (TINY,), ()]:
        for requester in (gov.Requester.LOCAL_AGENT.value, gov.Requester.PEER.value):
            for as_of in moments:
                visibility = Visibility(frozenset(namespaces), frozenset(), frozenset({"generated"}),
                                        frozenset(), requester, now, as_of)
                for rowid, row in rows.items():
                    crystal = crystals[rowid]
                    in_time = crystal.is_current(now) if as_of is None else valid_then(crystal, as_of)
                    in_namespace = not namespaces or crystal.namespace in namespaces
                    assert visibility.visible(row) == (
                        in_time and in_namespace and crystal.lifecycle.value == "generated"
                        and gov.can_access(crystal.governance.access_scope, crystal.lifecycle, requester)
                    ), (crystal.text, namespaces, requester, as_of)
                    assert visibility.listed(row) == (in_namespace and (as_of is not None or crystal.is_current(now)))


def test_a_governance_record_that_is_not_json_hides_its_row_and_fails_nothing(memory: Memory) -> None:
    kept = memory.add("the ferry timetable changes in October")
    broken = memory.add("the ferry timetable for the islands")
    with memory.db.transaction() as conn:  # a hostile or damaged file
        conn.execute("UPDATE crystals SET governance_json='{not json' WHERE id=?", (broken.id,))
    request = SearchRequest("ferry timetable", record_access=False)
    assert [hit.crystal.id for hit in memory.search(request)] == [kept.id]
    full = search_baseline.baseline_search(memory.store, memory.index, memory.embed, memory.hormones, request,
                                      memory.learning.confidences)
    assert [hit.crystal.id for hit in full] == [kept.id]  # main skipped it too (unparseable)


@pytest.mark.parametrize("record", ["[]", "7", '"public"', '{"accessScope": 5}', '{"accessScope": "everyone"}', "null"])
def test_a_governance_record_of_the_wrong_shape_hides_its_row_and_fails_nothing(
    memory: Memory, record: str
) -> None:
    kept = memory.add(f"the tram map was redrawn {record}")
    broken = memory.add(f"the tram map for the old town {record}")
    with memory.db.transaction() as conn:  # valid JSON, wrong shape: crafted on disk
        conn.execute("UPDATE crystals SET governance_json=? WHERE id=?", (record, broken.id))
    hits = memory.search(SearchRequest("tram map", record_access=False))
    assert broken.id not in [hit.crystal.id for hit in hits] and kept.id in [hit.crystal.id for hit in hits]
