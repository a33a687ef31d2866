"""The ingestion gate and trust levels as the TrustService computes them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.config import NodeConfig
from node.db import Database
from node.net.rules.validation import Rejection
from node.trust.gate import (
    REASON_ADMITTED,
    REASON_BANNED,
    REASON_UNTRUSTED,
    REASON_WEATHER_HALT,
    decide,
)
from node.trust.ledger import TrustEvent
from node.trust.levels import TrustLevel
from node.trust.policy import assess
from node.trust.service import APP_SCORES, TrustService
from protocol.identity import peer_id_from_public_key
from protocol.messages import PPM, TrustEntry, TrustReport

OWN = bytes([9]) * 32
MANAGEMENT = bytes([8]) * 32
GOOD = bytes([1]) * 32
OKAY = bytes([2]) * 32
BAD = bytes([3]) * 32
CHEAT = bytes([4]) * 32
NEW = bytes([5]) * 32


class Weather:
    halt = False

    def __call__(self) -> bool:
        return self.halt


@pytest.fixture
def weather() -> Weather:
    return Weather()


@pytest.fixture
def trust(weather: Weather) -> Iterator[TrustService]:
    store = Database(Path(":memory:"))
    service = TrustService(store, NodeConfig(), OWN, {MANAGEMENT}, weather, clock=lambda: 1_000_000)
    # GOOD: 9 good deliveries, OKAY: 1 → c = 0.9 / 0.1 over 2 rated peers
    for _ in range(9):
        service.record(GOOD, TrustEvent.DELIVERED_OK)
    service.record(OKAY, TrustEvent.DELIVERED_OK)
    service.record(BAD, TrustEvent.DELIVERED_OK)
    service.record(BAD, TrustEvent.EXECUTION_FAILURE, "poisoned")
    for _ in range(3):
        service.record(CHEAT, TrustEvent.DELIVERY_TAMPERED, "hash mismatch")
    yield service
    store.close()


def test_decide_by_hand() -> None:
    assert decide(TrustLevel.BANNED, False).reason == REASON_BANNED
    assert decide(TrustLevel.UNTRUSTED, False).reason == REASON_UNTRUSTED
    assert decide(TrustLevel.PROVISIONAL, False).admitted
    halted = decide(TrustLevel.PROVISIONAL, True)
    assert not halted.admitted and halted.reason == REASON_WEATHER_HALT
    assert decide(TrustLevel.TRUSTED, True).reason == REASON_ADMITTED
    assert decide(TrustLevel.VERIFIED, True).admitted


def test_levels(trust: TrustService) -> None:
    assert trust.level(GOOD) is TrustLevel.TRUSTED  # c = 0.9, x = 1.8 → 0.643
    assert trust.level(OKAY) is TrustLevel.PROVISIONAL  # low share but only good experience
    assert trust.level(BAD) is TrustLevel.UNTRUSTED  # s = 1 − 2 < 0
    assert trust.level(CHEAT) is TrustLevel.BANNED  # 3 offences = ban_after_offences
    assert trust.level(NEW) is TrustLevel.PROVISIONAL
    assert trust.level(MANAGEMENT) is TrustLevel.VERIFIED
    assert trust.peers_to_ban() == [CHEAT]


def test_new_peers_are_provisional_even_after_recompute(trust: TrustService) -> None:
    trust.recompute()
    assert trust.level(NEW) is TrustLevel.PROVISIONAL
    assert trust.reputation(NEW) == 0.5


def test_gate_outside_weather(trust: TrustService) -> None:
    assert trust.gate(CHEAT).reason == REASON_BANNED
    assert not trust.gate(BAD).admitted
    assert trust.gate(NEW).admitted
    assert trust.gate(GOOD).admitted


def test_gate_under_weather_halt(trust: TrustService, weather: Weather) -> None:
    weather.halt = True
    provisional = trust.gate(NEW, kind="skill")
    assert not provisional.admitted and provisional.reason == REASON_WEATHER_HALT
    assert trust.gate(GOOD).admitted
    assert trust.gate(MANAGEMENT).admitted
    assert not trust.gate(CHEAT).admitted


def test_management_is_always_admitted_even_with_offences(
    trust: TrustService, weather: Weather
) -> None:
    for _ in range(5):
        trust.record(MANAGEMENT, TrustEvent.DELIVERY_TAMPERED)
    weather.halt = True
    decision = trust.gate(MANAGEMENT)
    assert decision.admitted and decision.level is TrustLevel.VERIFIED


def test_every_decision_is_recorded_with_its_reason(trust: TrustService, weather: Weather) -> None:
    trust.gate(BAD, kind="listing")
    weather.halt = True
    trust.gate(OKAY)
    decisions = trust.ledger.decisions()
    assert [(d["peer_key"], d["kind"], d["admitted"], d["reason"]) for d in decisions] == [
        (OKAY.hex(), "skill", False, REASON_WEATHER_HALT),
        (BAD.hex(), "listing", False, REASON_UNTRUSTED),
    ]
    assert trust.ledger.peer(OKAY).last_reason == "rejected skill: weather_halt"  # type: ignore[union-attr]


def test_own_key_is_never_recorded_and_always_admitted(trust: TrustService) -> None:
    assert trust.record(OWN, TrustEvent.DELIVERY_TAMPERED) is None
    assert trust.gate(OWN).admitted


def test_rejections_are_buffered_then_flushed(trust: TrustService) -> None:
    peer_id = peer_id_from_public_key(NEW)
    for _ in range(3):
        trust.on_rejection(Rejection(peer_id, "bad_signature", "/crystalmesh/1/skills"))
    trust.on_rejection(Rejection("not-a-peer-id", "malformed", "/crystalmesh/1/skills"))
    assert trust.level(NEW) is TrustLevel.PROVISIONAL
    assert trust.flush_rejections() == 3
    assert trust.level(NEW) is TrustLevel.BANNED
    assert trust.app_score(peer_id) == APP_SCORES[TrustLevel.BANNED]
    trust.unban(NEW)
    assert trust.level(NEW) is TrustLevel.UNTRUSTED  # history stays: s = −15


def test_reports_move_global_trust(trust: TrustService) -> None:
    # MANAGEMENT (pre-trusted) vouches for NEW, and distrusts OKAY
    trust.add_report(
        MANAGEMENT,
        TrustReport(epoch=1, row=(TrustEntry(NEW, PPM), TrustEntry(OKAY, 0))),
        issued_at_ms=1_000_000,
    )
    trust.recompute()
    rows = {row["peer_key"]: row for row in trust.show()}
    assert rows[NEW.hex()]["global"] > 0
    assert trust.level(NEW).at_least(TrustLevel.PROVISIONAL)
    # our own good experience outweighs the network's distrust
    assert trust.level(OKAY) is TrustLevel.PROVISIONAL
    report = trust.build_report(epoch=5)
    assert {entry.peer for entry in report.row if entry.weight_ppm} == {GOOD, OKAY}
    assert {entry.peer for entry in report.row if not entry.weight_ppm} == {BAD, CHEAT}
    report.check()


def test_network_distrust_makes_an_unknown_peer_untrusted(trust: TrustService) -> None:
    trust.add_report(
        MANAGEMENT, TrustReport(epoch=1, row=(TrustEntry(GOOD, PPM), TrustEntry(NEW, 0))), 1_000_000
    )
    trust.recompute()
    assert trust.level(NEW) is TrustLevel.UNTRUSTED


def test_assess_by_hand() -> None:
    # global only, x = 0.01·100 = 1 → 0.5 provisional
    assert assess(None, None, 0.01, 100, 0) == (pytest.approx(0.5), TrustLevel.PROVISIONAL)
    # low share without negative evidence stays provisional
    assert assess(None, None, 0.001, 100, 0)[1] is TrustLevel.PROVISIONAL
    # same share, but the trusted reporters distrust it
    assert assess(None, None, 0.001, 100, 0, vouch=0.1, distrust=0.2)[1] is TrustLevel.UNTRUSTED
    # our experience is net negative
    assert assess(0.0, -1.0, None, 100, 3)[1] is TrustLevel.UNTRUSTED
    assert assess(None, None, None, 0, 0) == (0.5, TrustLevel.PROVISIONAL)
    assert assess(0.0, -1.0, None, 1, 1, banned=True)[1] is TrustLevel.BANNED


def test_show_rows(trust: TrustService) -> None:
    rows = trust.show()
    assert rows[0]["level"] == "verified" and rows[0]["peer_key"] == MANAGEMENT.hex()
    good = next(row for row in rows if row["peer_key"] == GOOD.hex())
    assert good["peer_id"] == peer_id_from_public_key(GOOD)
    assert good["local"] == pytest.approx(0.9)
    assert good["level"] == "trusted"
    assert set(good) >= {"peer_key", "peer_id", "local", "global", "level", "last_reason"}
