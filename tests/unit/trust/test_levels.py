import pytest

from node.trust.levels import TrustLevel, level_for, relative_score, reputation


def test_relative_score_by_hand() -> None:
    # x = 0.01·100 = 1 (exactly average) → 1/2
    assert relative_score(0.01, 100) == pytest.approx(0.5)
    # x = 0.03·100 = 3 → 3/4
    assert relative_score(0.03, 100) == pytest.approx(0.75)
    assert relative_score(0.0, 100) == 0.0
    assert relative_score(-0.2, 100) == 0.0


def test_reputation_from_global_only() -> None:
    assert reputation(None, 0.03, 100) == pytest.approx(0.75)


def test_reputation_from_local_only() -> None:
    # c_ij = 0.5 over 2 rated peers: x = 1 → 0.5
    assert reputation(0.5, None, 100, local_peers=2) == pytest.approx(0.5)


def test_reputation_blends_local_and_global_by_hand() -> None:
    # g: x = 0.03·100 = 3 → 0.75; l: x = 0.9·4 = 3.6 → 3.6/4.6 = 0.782609
    # 0.5·0.75 + 0.5·0.782609 = 0.766304
    assert reputation(0.9, 0.03, 100, local_peers=4) == pytest.approx(0.766304, abs=1e-6)
    # w = 0.25: 0.75·0.75 + 0.25·0.782609 = 0.758152
    assert reputation(0.9, 0.03, 100, local_peers=4, local_weight=0.25) == pytest.approx(
        0.758152, abs=1e-6
    )


def test_no_evidence_is_neutral() -> None:
    assert reputation(None, None, 100) == 0.5
    assert reputation(None, 0.5, 0) == 0.5


def test_reputation_is_in_unit_interval() -> None:
    assert 0.0 <= reputation(0.0, 0.0, 10) < reputation(1.0, 1.0, 10) < 1.0


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (0.0, TrustLevel.UNTRUSTED),
        (0.29, TrustLevel.UNTRUSTED),
        (0.3, TrustLevel.PROVISIONAL),
        (0.5, TrustLevel.PROVISIONAL),
        (0.6, TrustLevel.TRUSTED),
        (0.84, TrustLevel.TRUSTED),
        (0.85, TrustLevel.VERIFIED),
    ],
)
def test_level_bands(score: float, level: TrustLevel) -> None:
    assert level_for(score) == level


def test_level_precedence() -> None:
    assert level_for(0.99, banned=True, is_management=True) == TrustLevel.BANNED
    assert level_for(0.0, is_management=True) == TrustLevel.VERIFIED
    assert level_for(0.0, has_evidence=False) == TrustLevel.PROVISIONAL
    assert level_for(0.99, has_evidence=False) == TrustLevel.PROVISIONAL


def test_custom_thresholds() -> None:
    assert level_for(0.5, thresholds=(0.1, 0.2, 0.9)) == TrustLevel.TRUSTED
    with pytest.raises(ValueError):
        level_for(0.5, thresholds=(0.6, 0.3, 0.9))


def test_level_ordering() -> None:
    assert TrustLevel.TRUSTED.at_least(TrustLevel.TRUSTED)
    assert TrustLevel.VERIFIED.at_least(TrustLevel.TRUSTED)
    assert not TrustLevel.PROVISIONAL.at_least(TrustLevel.TRUSTED)
    assert [level.rank for level in TrustLevel] == [0, 1, 2, 3, 4]
