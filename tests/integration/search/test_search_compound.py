"""Memory.search on compound questions, and its light candidate rows under hostile data.

Real store and HNSW index; MiniLM for the compound question (the retrieval
set's memories), the hashing embedder for the governance cases.
"""

from __future__ import annotations

from node.memory.facade import Memory, SearchRequest


def test_a_compound_question_gets_both_halves_in_the_top_two(retrieval_memory: Memory) -> None:
    # One embedding of the whole question puts the visit 6th; its clause
    # "my sister visited Lisbon" finds it.
    hits = retrieval_memory.search(
        SearchRequest(
            "what app version was current when my sister visited Lisbon", k=5, record_access=False
        )
    )
    top_two = " | ".join(hit.crystal.text for hit in hits[:2])
    assert "Carolina visited Lisbon" in top_two, top_two
    assert "v2.3.2 shipped on 29 April" in top_two, top_two


def test_a_one_clause_query_ranks_as_before(memory: Memory) -> None:
    for text in ("The payouts worker stalled during the April incident.", "Lunch was late."):
        memory.add(text)
    hits = memory.search(SearchRequest("payouts worker stalled", k=5, record_access=False))
    assert hits[0].crystal.text.startswith("The payouts worker")


def test_a_crafted_row_is_skipped_not_fatal(memory: Memory) -> None:
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
    # The unreadable lifecycle is skipped; the scope column is not what decides
    # (the governance record is), so that crystal is still found.
    assert set(ids) == {kept.id, odd.id}


def test_the_parsed_governance_still_decides_when_the_column_lies(memory: Memory) -> None:
    secret = memory.add("the payouts signing key is sk-live-0123456789abcdefghijklmnop")
    assert secret.governance.access_scope.value == "confidential"
    with memory.db.transaction() as conn:  # the plain column says public, the JSON does not
        conn.execute("UPDATE crystals SET access_scope='public' WHERE id=?", (secret.id,))
    assert memory.search(SearchRequest("payouts signing key", requester="peer")) == []
    local = memory.search(SearchRequest("payouts signing key", record_access=False))
    assert [hit.crystal.id for hit in local] == [secret.id]
