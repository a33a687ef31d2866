"""Interaction ledger: events → s_ij → normalised c_ij, offences, transactional writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.db import Database
from node.trust.ledger import EventWeights, Ledger, TrustEvent, UnknownPeerKey, peer_key_hex

A = bytes([1]) * 32
B = bytes([2]) * 32
C = bytes([3]) * 32


@pytest.fixture
def store() -> Iterator[Database]:
    store = Database(Path(":memory:"))
    yield store
    store.close()


def test_local_trust_is_satisfactory_minus_unsatisfactory(store: Database) -> None:
    ledger = Ledger(store, clock=lambda: 1000)
    ledger.record(A, TrustEvent.DELIVERED_OK)
    ledger.record(A, TrustEvent.EXECUTION_SUCCESS)
    ledger.record(B, TrustEvent.DELIVERED_OK)
    ledger.record(B, "execution_failure", "poisoned")
    ledger.record(C, TrustEvent.DELIVERED_OK)
    # s_A = 1 + 1 = 2, s_B = 1 − 2 = −1, s_C = 1
    assert ledger.local_trust() == {A.hex(): 2.0, B.hex(): -1.0, C.hex(): 1.0}
    # c = max(s, 0) / Σ max(s, 0): A 2/3, C 1/3, B dropped
    assert dict(ledger.normalised_row()) == pytest.approx({A.hex(): 2 / 3, C.hex(): 1 / 3})
    assert sorted(ledger.distrusted()) == [B.hex()]


def test_tampered_delivery_weighs_heavily_and_is_an_offence(store: Database) -> None:
    ledger = Ledger(store)
    for _ in range(5):
        ledger.record(A, TrustEvent.DELIVERED_OK)
    record = ledger.record(A, TrustEvent.DELIVERY_TAMPERED, "hash mismatch")
    assert record.local_trust == 5 - 10
    assert record.offences == 1
    assert record.last_reason == "delivery_tampered: hash mismatch"
    assert ledger.normalised_row() == {}


def test_invalid_message_weights_by_reason(store: Database) -> None:
    ledger = Ledger(store)
    stale = ledger.record(A, TrustEvent.INVALID_MESSAGE, "stale")
    assert stale.local_trust == 0 and not stale.has_evidence and stale.offences == 0
    forged = ledger.record(A, TrustEvent.INVALID_MESSAGE, "bad_signature")
    assert forged.local_trust == -5 and forged.offences == 1
    body = ledger.record(B, TrustEvent.INVALID_MESSAGE, "bad_body")
    assert body.local_trust == -2 and body.offences == 0


def test_weights_are_configurable(store: Database) -> None:
    ledger = Ledger(store, EventWeights(execution_failure=0.5))
    ledger.record(A, TrustEvent.DELIVERED_OK)
    assert ledger.record(A, TrustEvent.EXECUTION_FAILURE).local_trust == 0.5


def test_events_and_aggregates_survive_a_reload(store: Database) -> None:
    ledger = Ledger(store, clock=lambda: 42)
    ledger.record_many(
        [(A, "delivered_ok", ""), (A, "execution_success", ""), (B, "delivery_failed", "")]
    )
    again = Ledger(store)
    assert again.local_trust() == ledger.local_trust()
    assert [event["kind"] for event in again.events(A)] == ["execution_success", "delivered_ok"]
    assert again.events(B)[0]["weight"] == -1.0


def test_a_failed_write_changes_nothing(store: Database) -> None:
    ledger = Ledger(store)
    ledger.record(A, TrustEvent.DELIVERED_OK)
    with pytest.raises(ValueError):
        ledger.record_many([(B, "delivered_ok", ""), (C, "no_such_event", "")])
    assert ledger.peer(B) is None
    assert Ledger(store).local_trust() == {A.hex(): 1.0}
    assert store.execute("SELECT COUNT(*) FROM trust_events").fetchone()[0] == 1


def test_ban_and_unban(store: Database) -> None:
    ledger = Ledger(store)
    ledger.record(A, TrustEvent.DELIVERED_OK)
    ledger.record(A, TrustEvent.DELIVERY_TAMPERED)
    assert ledger.set_banned(A, True, "manual").banned
    assert ledger.normalised_row() == {}
    unbanned = ledger.set_banned(A, False, "unbanned")
    assert not unbanned.banned and unbanned.offences == 0


def test_prune_keeps_the_newest_events(store: Database) -> None:
    ledger = Ledger(store)
    for _ in range(5):
        ledger.record(A, TrustEvent.DELIVERED_OK)
    assert ledger.prune(keep_events=2) == 3
    assert len(ledger.events(A)) == 2
    assert ledger.peer(A) is not None and ledger.peer(A).events == 5  # type: ignore[union-attr]


def test_peer_keys_are_checked() -> None:
    assert peer_key_hex(A) == A.hex() == peer_key_hex(A.hex().upper())
    for bad in (b"short", "zz" * 32, "ab"):
        with pytest.raises(UnknownPeerKey):
            peer_key_hex(bad)
