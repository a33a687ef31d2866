import pytest

from node.crystals.model import HormonalInfluence, Origin
from node.memory.dynamics.hormones import (
    HormonalEvent,
    HormonalStateManager,
    compute_crystal_influence,
    decay_toward,
    detect_events,
    emotional_valence,
)
from tests.support.clock import HandClock

MINUTE = 60_000


def test_decay_toward_homeostasis_by_hand() -> None:
    # dopamine 0.75, homeostasis 0.15, one half-life: 0.15 + (0.75 − 0.15)·0.5 = 0.45
    assert decay_toward(0.75, 0.15, 30 * MINUTE, 30 * MINUTE) == pytest.approx(0.45)
    # two half-lives: 0.15 + 0.6·0.25 = 0.30
    assert decay_toward(0.75, 0.15, 60 * MINUTE, 30 * MINUTE) == pytest.approx(0.30)
    # below 0.001 is clamped to 0: 0 + 0.0015·0.5 = 0.00075 → 0
    assert decay_toward(0.0015, 0.0, 10, 10) == 0.0


def test_starts_at_homeostasis() -> None:
    state = HormonalStateManager(now_ms=HandClock(1_000_000)).state()
    assert (state.dopamine, state.cortisol, state.oxytocin) == (0.15, 0.02, 0.10)


def test_spike_then_decay() -> None:
    clock = HandClock(1_000_000)
    manager = HormonalStateManager(now_ms=clock)
    # reward: 0.15 + 0.3 = 0.45
    assert manager.spike("reward").dopamine == pytest.approx(0.45)
    clock.now += 30 * MINUTE  # one dopamine half-life: 0.15 + 0.3·0.5 = 0.30
    assert manager.state().dopamine == pytest.approx(0.30)
    # achievement: dopamine 0.30 + 0.4 = 0.70; oxytocin 0.10 (at homeostasis) + 0.2 = 0.30
    state = manager.spike(HormonalEvent.ACHIEVEMENT)
    assert state.dopamine == pytest.approx(0.70)
    assert state.oxytocin == pytest.approx(0.30)


def test_spikes_are_clamped_to_one() -> None:
    manager = HormonalStateManager(now_ms=HandClock(1_000_000))
    for _ in range(3):
        state = manager.spike("urgency")  # 0.02 + 0.4 + 0.4 + 0.4 = 1.22 → 1.0
    assert state.cortisol == 1.0


def test_unknown_event_is_rejected() -> None:
    with pytest.raises(ValueError):
        HormonalStateManager(now_ms=HandClock(1_000_000)).spike("boredom")


@pytest.mark.parametrize(
    ("text", "events"),
    [
        ("Deploy succeeded: SUCCESS", [HormonalEvent.REWARD]),
        ("fixed the flaky test", [HormonalEvent.REWARD]),
        ("We shipped v2, a big milestone", [HormonalEvent.ACHIEVEMENT]),
        ("the build failed with 3 errors", [HormonalEvent.ERROR]),
        ("Crashed again. Bugs everywhere", [HormonalEvent.ERROR]),
        ("urgent: deadline is Friday", [HormonalEvent.URGENCY]),
        ("Thanks, that was helpful", [HormonalEvent.SOCIAL]),
        ("my teammate and I collaborated", [HormonalEvent.SOCIAL]),
        ("terror in the steamship", []),  # no prefix match inside words
        ("debugging a prefailure in helium", []),
        ("", []),
    ],
)
def test_detect_events(text: str, events: list[HormonalEvent]) -> None:
    assert detect_events(text) == events


def test_compute_crystal_influence_by_hand() -> None:
    text = "Shipped the fix after the crash, thanks team"
    # achievement (d .4, o .2) + error (c .3) + social (o .3); session +0.1 oxytocin
    influence = compute_crystal_influence(text, Origin.SESSION)
    assert influence.dopamine == pytest.approx(0.4)
    assert influence.cortisol == pytest.approx(0.3)
    assert influence.oxytocin == pytest.approx(0.6)  # 0.1 + 0.2 + 0.3
    # valence = (0.4 + 0.6 − 0.3) / 2 = 0.35
    assert emotional_valence(influence) == pytest.approx(0.35)
    plain = compute_crystal_influence("a note about sqlite", Origin.INDEXED)
    assert plain == HormonalInfluence(0.0, 0.0, 0.0)
    assert compute_crystal_influence("a note", "session").oxytocin == pytest.approx(0.1)


def test_emotional_valence_negative() -> None:
    # (0 + 0 − 0.7) / 2 = −0.35
    assert emotional_valence(HormonalInfluence(cortisol=0.7)) == pytest.approx(-0.35)


def test_modulation_at_homeostasis_by_hand() -> None:
    manager = HormonalStateManager(now_ms=HandClock(1_000_000))
    consolidation = manager.consolidation_modulation()
    # 0.02·0.3 + 0.15·0.2 + 0.10·0.2 = 0.006 + 0.03 + 0.02 = 0.056
    assert consolidation.decay_resistance == pytest.approx(0.056)
    # 0.92 + 0.02·0.03 = 0.9206
    assert consolidation.merge_threshold == pytest.approx(0.9206)
    assert consolidation.halt_untrusted_ingestion is False
    retrieval = manager.retrieval_modulation()
    assert retrieval.importance_boost == pytest.approx(1.03)  # 1 + 0.15·0.2
    assert retrieval.recency_bias == pytest.approx(1.006)  # 1 + 0.02·0.3


def test_decay_resistance_is_capped_at_half() -> None:
    manager = HormonalStateManager(
        now_ms=HandClock(1_000_000), levels={"dopamine": 1, "cortisol": 1, "oxytocin": 1}
    )
    # 0.3 + 0.2 + 0.2 = 0.7 → capped to 0.5
    assert manager.consolidation_modulation().decay_resistance == 0.5


def test_base_merge_threshold_comes_from_config() -> None:
    manager = HormonalStateManager(now_ms=HandClock(1_000_000), base_merge_threshold=0.9)
    assert manager.consolidation_modulation().merge_threshold == pytest.approx(0.9006)


def test_network_cortisol_override_until_absolute_expiry() -> None:
    clock = HandClock(0)
    manager = HormonalStateManager(now_ms=clock)
    assert manager.apply_network_cortisol_spike(0.9, 300_000, "sybil burst") is True
    clock.now = 100_000
    assert manager.state().cortisol == 0.9  # max(local 0.02, 0.9)
    assert manager.local_state().cortisol == pytest.approx(0.02)
    modulation = manager.consolidation_modulation()
    # 0.9·0.3 + 0.15·0.2 + 0.10·0.2 = 0.27 + 0.03 + 0.02 = 0.32
    assert modulation.decay_resistance == pytest.approx(0.32)
    assert modulation.merge_threshold == pytest.approx(0.947)  # 0.92 + 0.9·0.03
    assert modulation.halt_untrusted_ingestion is True
    assert manager.retrieval_modulation().recency_bias == pytest.approx(1.27)  # 1 + 0.9·0.3
    assert manager.weather() == {
        "active": True,
        "level": 0.9,
        "expires_at_ms": 300_000,
        "remaining_ms": 200_000,
        "reason": "sybil burst",
    }
    clock.now = 300_000  # expiry is exclusive
    assert manager.consolidation_modulation().halt_untrusted_ingestion is False
    assert manager.weather()["active"] is False
    assert manager.state().cortisol < 0.9


def test_override_does_not_lower_higher_local_cortisol() -> None:
    manager = HormonalStateManager(now_ms=HandClock(0), levels={"cortisol": 0.95})
    manager.apply_network_cortisol_spike(0.5, 10_000, "drill")
    assert manager.state().cortisol == pytest.approx(0.95)


def test_expired_alert_is_ignored() -> None:
    clock = HandClock(500_000)
    manager = HormonalStateManager(now_ms=clock)
    assert manager.apply_network_cortisol_spike(0.9, 400_000, "replayed") is False
    assert manager.weather()["active"] is False
    assert manager.state().cortisol == pytest.approx(0.02)


def test_overlapping_alerts_each_count_until_their_own_expiry() -> None:
    clock = HandClock(0)
    manager = HormonalStateManager(now_ms=clock)
    manager.apply_network_cortisol_spike(0.9, 1_000, "strong, short")
    manager.apply_network_cortisol_spike(0.5, 5_000, "weak, long")
    assert manager.weather()["level"] == 0.9
    assert manager.weather()["expires_at_ms"] == 5_000
    clock.now = 2_000
    assert manager.state().cortisol == 0.5
    assert manager.weather()["reason"] == "weak, long"


def test_round_trip_through_dict() -> None:
    clock = HandClock(0)
    manager = HormonalStateManager(now_ms=clock)
    manager.spike("error")
    manager.apply_network_cortisol_spike(0.8, 60 * MINUTE, "drill")
    saved = manager.to_dict()
    clock.now = 60 * MINUTE - 1
    restored = HormonalStateManager.from_dict(saved, now_ms=clock)
    assert restored.state() == manager.state()
    assert restored.weather() == manager.weather()
    clock.now = 60 * MINUTE  # one cortisol half-life after the spike: 0.02 + 0.3·0.5 = 0.17
    assert restored.state().cortisol == pytest.approx(0.17)


def test_observe_spikes_detected_events() -> None:
    manager = HormonalStateManager(now_ms=HandClock(1_000_000))
    assert manager.observe("tests failed") == [HormonalEvent.ERROR]
    assert manager.state().cortisol == pytest.approx(0.32)  # 0.02 + 0.3


def test_a_lift_ends_only_its_signers_alerts_issued_up_to_it() -> None:
    clock = HandClock(10 * MINUTE)
    manager = HormonalStateManager(now_ms=clock)
    manager.apply_network_cortisol_spike(0.9, 60 * MINUTE, "mine, early", 1 * MINUTE, "aa")
    manager.apply_network_cortisol_spike(0.8, 60 * MINUTE, "other key", 2 * MINUTE, "bb")
    manager.apply_network_cortisol_spike(0.7, 60 * MINUTE, "mine, after the lift", 6 * MINUTE, "aa")
    assert manager.lift_network_cortisol("aa", 5 * MINUTE) == 1
    assert sorted(o.reason for o in manager.overrides) == ["mine, after the lift", "other key"]
    assert manager.weather()["level"] == 0.8
    restored = HormonalStateManager.from_dict(manager.to_dict(), now_ms=clock)
    assert restored.lift_network_cortisol("bb", 9 * MINUTE) == 1  # the signer survives a restart
    assert restored.lift_network_cortisol("aa", 9 * MINUTE) == 1
    assert restored.weather()["active"] is False
    assert restored.lift_network_cortisol("aa", 9 * MINUTE) == 0
