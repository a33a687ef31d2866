"""A clean record of good trades makes a peer trusted; any negative evidence removes that."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.config import NodeConfig
from node.db import Database
from node.trust.ledger import TrustEvent
from node.trust.levels import TrustLevel
from node.trust.policy import TRUSTED_RECORD, assess
from node.trust.service import TrustService

OWN = bytes([9]) * 32
MANAGEMENT = bytes([8]) * 32
SELLERS = [bytes([i]) * 32 for i in range(1, 7)]


@pytest.fixture
def trust() -> Iterator[TrustService]:
    store = Database(Path(":memory:"))
    service = TrustService(store, NodeConfig(), OWN, {MANAGEMENT}, lambda: True,
                           clock=lambda: 1_000_000)
    yield service
    store.close()


def _good_trade(trust: TrustService, seller: bytes) -> None:
    trust.record(seller, TrustEvent.DELIVERED_OK)
    trust.record(seller, TrustEvent.EXECUTION_SUCCESS)


def test_two_good_trades_make_an_average_seller_trusted(trust: TrustService) -> None:
    # Six sellers, each with the same record: every one holds exactly the average
    # share, so the relative score alone leaves them provisional (0.5).
    for seller in SELLERS:
        _good_trade(trust, seller)
    trust.recompute()
    assert {trust.level(seller) for seller in SELLERS} == {TrustLevel.PROVISIONAL}
    assert not trust.gate(SELLERS[0]).admitted  # weather admits only trusted peers

    for seller in SELLERS:
        _good_trade(trust, seller)  # round 2: the second good trade
    trust.recompute()
    assert {trust.level(seller) for seller in SELLERS} == {TrustLevel.TRUSTED}
    assert trust.gate(SELLERS[0]).admitted


def test_one_failure_takes_the_promotion_away(trust: TrustService) -> None:
    for seller in SELLERS[:3]:
        _good_trade(trust, seller)
        _good_trade(trust, seller)
    assert trust.level(SELLERS[0]) is TrustLevel.TRUSTED
    trust.record(SELLERS[0], TrustEvent.DELIVERED_OK)
    trust.record(SELLERS[0], TrustEvent.EXECUTION_FAILURE, "poisoned")
    # s_ij is still positive (4 + 1 − 2) but the record is no longer clean: by score only.
    assert trust.level(SELLERS[0]) is TrustLevel.PROVISIONAL
    assert trust.level(SELLERS[1]) is TrustLevel.TRUSTED


def test_the_clean_record_needs_our_own_trades_and_no_distrust() -> None:
    # Praise from others (global trust) is not a record of ours.
    assert assess(None, None, 0.1, 10, 0)[1] is TrustLevel.PROVISIONAL
    # Our clean record is enough...
    assert assess(0.5, TRUSTED_RECORD, None, 0, 2,
                  satisfactory=TRUSTED_RECORD)[1] is TrustLevel.TRUSTED
    # ...but not one trade short of it, nor with an offence, nor when outvoted.
    assert assess(0.5, 2.0, None, 0, 2, satisfactory=2.0)[1] is TrustLevel.PROVISIONAL
    assert assess(0.5, TRUSTED_RECORD, None, 0, 2, satisfactory=TRUSTED_RECORD,
                  offences=1)[1] is TrustLevel.PROVISIONAL
    outvoted = assess(None, None, None, 10, 0, vouch=0.1, distrust=0.5,
                      satisfactory=TRUSTED_RECORD)
    assert outvoted[1] is TrustLevel.UNTRUSTED
    assert assess(0.5, TRUSTED_RECORD, None, 0, 2, satisfactory=TRUSTED_RECORD,
                  banned=True)[1] is TrustLevel.BANNED
