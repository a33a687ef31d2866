import math

import pytest

from node.memory.dynamics.importance import effective_decay_rate, frequency_factor, importance

HALF_LIFE_MS = math.log(2) / 5e-10  # ≈ 1.386e9 ms ≈ 16.05 days


def test_frequency_factor_by_hand() -> None:
    # f(0) = 1 − e^(−0.1·1) = 1 − 0.904837 = 0.095163
    assert frequency_factor(0) == pytest.approx(0.0951626, abs=1e-7)
    # f(9) = 1 − e^(−0.1·10) = 1 − 0.367879 = 0.632121
    assert frequency_factor(9) == pytest.approx(0.6321206, abs=1e-7)
    # f(19) = 1 − e^(−2) = 1 − 0.135335 = 0.864665
    assert frequency_factor(19) == pytest.approx(0.8646647, abs=1e-7)


def test_importance_without_elapsed_time_is_frequency_factor() -> None:
    # Δt = 0 → e^0 = 1 → I = 1 · f(9) = 0.632121
    assert importance(9, 0, None) == pytest.approx(0.6321206, abs=1e-7)


def test_default_decay_rate_halves_importance_in_about_16_days() -> None:
    # λ = 5e-10 /ms, Δt = ln2/λ = 1.386e9 ms → I = 0.632121 / 2 = 0.316060
    assert importance(9, HALF_LIFE_MS, None) == pytest.approx(0.3160603, abs=1e-7)
    half_life_days = HALF_LIFE_MS / 86_400_000
    assert half_life_days == pytest.approx(16.05, abs=0.01)


def test_emotional_valence_slows_decay() -> None:
    # valence 1, resistance 0.5: λ_eff = 5e-10·(1 − 1·0.5) = 2.5e-10
    # Δt = 1e9 → e^(−0.25) = 0.778801 → I = 0.632121·0.778801 = 0.492296
    assert importance(9, 1e9, 1.0) == pytest.approx(0.4922960, abs=1e-7)
    # valence −0.6 counts by magnitude: λ_eff = 5e-10·(1 − 0.6·0.5) = 3.5e-10
    # Δt = 2e9 → e^(−0.7) = 0.496585 → I = 0.632121·0.496585 = 0.313902
    assert importance(9, 2e9, -0.6) == pytest.approx(0.3139018, abs=1e-7)


def test_missing_valence_counts_as_zero() -> None:
    assert importance(3, 1e9, None) == importance(3, 1e9, 0.0)


def test_hormonal_decay_resistance_is_an_extra_multiplier() -> None:
    # λ_eff = 5e-10 · (1 − 0) · (1 − 0.5) = 2.5e-10, same as valence 1 above → 0.492296
    assert effective_decay_rate(None, decay_resistance=0.5) == pytest.approx(2.5e-10)
    assert importance(9, 1e9, None, decay_resistance=0.5) == pytest.approx(0.4922960, abs=1e-7)
    # both: 5e-10 · 0.5 · 0.5 = 1.25e-10
    assert effective_decay_rate(1.0, decay_resistance=0.5) == pytest.approx(1.25e-10)


def test_negative_elapsed_time_is_clamped() -> None:
    assert importance(9, -1e9, None) == importance(9, 0, None)


def test_importance_stays_in_unit_interval() -> None:
    assert 0.0 <= importance(0, 1e12, -1.0) <= importance(10_000, 0, 1.0) <= 1.0
