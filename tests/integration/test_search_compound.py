"""Memory.search on compound questions, and its light candidate rows under hostile data.

Real store, real HNSW index, the hashing embedder (the effect tested here is
the clause search and the query-term coverage order, not semantic similarity).
"""

from __future__ import annotations

from node.memory.facade import Memory, SearchRequest

INCIDENT = [
    "The payouts worker stalled during the April incident.",
    "The payouts worker stalled again during the April incident review.",
    "April incident: the payouts worker stalled for an hour.",
    "Payouts incident in April: the worker stalled, retries piled up.",
]
HOST = "worker-eu-2 is the host that runs the payouts worker."
QUERY = "which host runs the worker that stalled in the April payouts incident"


def test_a_compound_question_gets_both_halves_in_the_top_two(memory: Memory) -> None:
    for text in [*INCIDENT, HOST, "The host of the team dinner runs late in April."]:
        memory.add(text)
    texts = [
        hit.crystal.text for hit in memory.search(SearchRequest(QUERY, k=5, record_access=False))
    ]
    assert HOST in texts[:2], texts
    assert texts[0] in INCIDENT or texts[1] in INCIDENT, texts


def test_a_one_clause_query_ranks_as_before(memory: Memory) -> None:
    for text in [*INCIDENT, HOST]:
        memory.add(text)
    texts = [
        hit.crystal.text
        for hit in memory.search(SearchRequest("payouts worker stalled", k=5, record_access=False))
    ]
    assert texts[0] in INCIDENT


def test_a_crafted_scope_or_lifecycle_column_is_skipped_not_fatal(memory: Memory) -> None:
    kept = memory.add("the payouts runbook lives in the ops wiki")
    odd = memory.add("the payouts worker runbook has a crafted scope")
    gone = memory.add("the payouts worker runbook has a crafted lifecycle")
    with memory.db.transaction() as conn:
        conn.execute("UPDATE crystals SET access_scope='galactic' WHERE id=?", (odd.id,))
        conn.execute("UPDATE crystals SET lifecycle='undead' WHERE id=?", (gone.id,))
    ids = [
        hit.crystal.id
        for hit in memory.search(SearchRequest("payouts runbook", record_access=False))
    ]
    assert ids == [kept.id]


def test_the_parsed_governance_still_decides_when_the_column_lies(memory: Memory) -> None:
    secret = memory.add("the payouts signing key is sk-live-0123456789abcdefghijklmnop")
    assert secret.governance.access_scope.value == "confidential"
    with memory.db.transaction() as conn:  # the plain column says public, the JSON does not
        conn.execute("UPDATE crystals SET access_scope='public' WHERE id=?", (secret.id,))
    assert memory.search(SearchRequest("payouts signing key", requester="peer")) == []
    local = memory.search(SearchRequest("payouts signing key", record_access=False))
    assert [hit.crystal.id for hit in local] == [secret.id]
