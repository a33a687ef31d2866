import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.trust.eigentrust import TrustMatrix, eigentrust, normalise_local_trust


def test_normalise_local_trust_by_hand() -> None:
    # positives 3 + 1 = 4 → 3/4, 1/4; the negative entry is dropped
    assert normalise_local_trust({"b": 3, "c": 1, "d": -2}) == {"b": 0.75, "c": 0.25}
    assert normalise_local_trust({}) == {}
    assert normalise_local_trust({"b": -1, "c": 0}) == {}


def test_symmetric_pair_without_pretrust() -> None:
    # p = (1/2, 1/2); Cᵀp = p, so t = p after one step
    result = eigentrust({"a": {"b": 1}, "b": {"a": 1}})
    assert result.trust == pytest.approx({"a": 0.5, "b": 0.5})
    assert (result.iterations, result.converged) == (1, True)


def test_three_cycle_with_one_pretrusted_peer() -> None:
    # a → b → c → a, p = (1, 0, 0), a = 0.15:
    # t_a = 0.85·t_c + 0.15, t_b = 0.85·t_a, t_c = 0.85·t_b
    # t_a = 0.15 / (1 − 0.85³) = 0.15 / 0.385875 = 0.388727
    # t_b = 0.85·0.388727 = 0.330418, t_c = 0.85·0.330418 = 0.280855
    result = eigentrust({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}, pretrusted={"a"})
    assert result.converged
    assert result.trust == pytest.approx({"a": 0.388727, "b": 0.330418, "c": 0.280855}, abs=1e-5)
    assert sum(result.trust.values()) == pytest.approx(1.0)


def test_dangling_peer_falls_back_to_pretrust() -> None:
    # a → b, b trusts nobody so its row is p = (1, 0):
    # t_a = 0.85·t_b + 0.15, t_b = 0.85·t_a → t_a = 0.15 / 0.2775 = 20/37, t_b = 17/37
    result = eigentrust({"a": {"b": 1}}, pretrusted={"a"})
    assert result.trust == pytest.approx({"a": 20 / 37, "b": 17 / 37}, abs=1e-5)


def test_weights_normalised_and_sybil_clique_gets_nothing() -> None:
    rows = {
        "a": {"b": 3, "c": 1},  # c_ab = 0.75, c_ac = 0.25
        "b": {"a": 1},
        "c": {"a": 1, "d": -4},  # negative trust is ignored
        "d": {"e": 5},  # d and e only vouch for each other
        "e": {"d": 5},
    }
    # t_b = 0.85·0.75·t_a = 0.6375·t_a, t_c = 0.85·0.25·t_a = 0.2125·t_a
    # t_a = 0.85·(t_b + t_c) + 0.15 = 0.7225·t_a + 0.15 → t_a = 20/37
    # t_b = 12.75/37 = 0.344595, t_c = 4.25/37 = 0.114865, t_d = t_e = 0
    result = eigentrust(rows, pretrusted={"a"})
    expected = {"a": 20 / 37, "b": 12.75 / 37, "c": 4.25 / 37, "d": 0.0, "e": 0.0}
    assert result.trust == pytest.approx(expected, abs=1e-5)


def test_self_trust_is_ignored() -> None:
    result = eigentrust({"a": {"a": 100, "b": 1}, "b": {"a": 1}})
    assert result.trust == pytest.approx({"a": 0.5, "b": 0.5})


def test_pretrusted_peer_outside_the_graph_is_included() -> None:
    # m is the only pre-trusted peer and nobody trusts a: t_m = 1, t_a = t_b = 0
    result = eigentrust({"a": {"b": 1}}, pretrusted={"m"})
    assert result.trust == pytest.approx({"a": 0.0, "b": 0.0, "m": 1.0}, abs=1e-6)


def test_iteration_cap_reports_not_converged() -> None:
    rows = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}
    result = eigentrust(rows, pretrusted={"a"}, max_iterations=2)
    assert (result.iterations, result.converged) == (2, False)
    assert sum(result.trust.values()) == pytest.approx(1.0)


def test_empty_graph() -> None:
    assert eigentrust({}).trust == {}
    assert eigentrust({}, pretrusted={"m"}).trust == {"m": 1.0}


def test_sparse_matrix_input_matches_rows() -> None:
    rows = {"a": {"b": 3, "c": 1}, "b": {"a": 1}, "c": {"a": 1}}
    matrix = TrustMatrix(
        peers=["a", "b", "c"],
        src=np.array([0, 0, 1, 2]),
        dst=np.array([1, 2, 0, 0]),
        weight=np.array([3.0, 1.0, 1.0, 1.0]),
    )
    assert eigentrust(matrix, {"a"}).trust == pytest.approx(eigentrust(rows, {"a"}).trust)
    assert TrustMatrix.from_rows(rows).peers == ["a", "b", "c"]


def test_alpha_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError):
        eigentrust({"a": {"b": 1}}, alpha=1.5)


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcdef"),
        st.dictionaries(st.sampled_from("abcdef"), st.floats(-5, 5), max_size=6),
        max_size=6,
    ),
    st.sets(st.sampled_from("abcdefg"), max_size=3),
)
def test_trust_is_a_distribution(rows: dict[str, dict[str, float]], pretrusted: set[str]) -> None:
    result = eigentrust(rows, pretrusted)
    if result.trust:
        assert sum(result.trust.values()) == pytest.approx(1.0)
        assert min(result.trust.values()) >= 0.0
