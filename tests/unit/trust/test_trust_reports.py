"""Trust reports: our row in ppm, and the matrix assembled from received reports."""

from __future__ import annotations

import pytest

from node.trust.reports import TrustMatrix, build_report, to_ppm
from protocol.messages import PPM, TrustEntry, TrustReport

OWN = bytes([9]) * 32


def key(i: int) -> bytes:
    return i.to_bytes(2, "big") * 16


def test_to_ppm_sums_to_exactly_one_million() -> None:
    assert to_ppm([1, 1, 1]) == [333_334, 333_333, 333_333]
    assert sum(to_ppm([0.1, 0.2, 0.7])) == PPM
    assert to_ppm([0.0, -1.0]) == [0, 0]
    assert to_ppm([]) == []


def test_report_is_normalised_and_excludes_self_and_banned() -> None:
    row = {OWN.hex(): 0.5, key(1).hex(): 0.3, key(2).hex(): 0.1, key(3).hex(): 0.1}
    report = build_report(row, epoch=7, own_key=OWN, exclude={key(3).hex()})
    assert report.epoch == 7
    assert [entry.peer for entry in report.row] == [key(1), key(2)]
    assert sum(entry.weight_ppm for entry in report.row) == PPM
    assert report.row[0].weight_ppm == 750_000
    report.check()
    report.check_envelope(OWN, 0)


def test_report_keeps_the_top_256() -> None:
    row = {key(i).hex(): float(i) for i in range(1, 401)}
    report = build_report(row, epoch=1, own_key=OWN)
    assert len(report.row) == 256
    assert {entry.peer for entry in report.row} == {key(i) for i in range(145, 401)}
    assert sum(entry.weight_ppm for entry in report.row) <= PPM
    report.check()


def test_report_lists_distrusted_peers_at_zero_ppm() -> None:
    report = build_report(
        {key(1).hex(): 1.0}, epoch=1, own_key=OWN, distrusted=[key(2).hex(), OWN.hex()]
    )
    assert report.row == (TrustEntry(key(1), PPM), TrustEntry(key(2), 0))


def test_empty_row_is_an_empty_report() -> None:
    assert build_report({}, epoch=3, own_key=OWN).row == ()


def report(epoch: int, *entries: tuple[bytes, int]) -> TrustReport:
    return TrustReport(epoch=epoch, row=tuple(TrustEntry(peer, ppm) for peer, ppm in entries))


def test_matrix_keeps_the_latest_report_per_sender() -> None:
    matrix = TrustMatrix(OWN, max_age_s=600)
    assert matrix.add(key(1), report(5, (key(2), PPM)), issued_at_ms=1000, now_ms=1000)
    assert not matrix.add(key(1), report(4, (key(3), PPM)), issued_at_ms=2000, now_ms=2000)
    assert not matrix.add(key(1), report(5, (key(3), PPM)), issued_at_ms=2000, now_ms=2000)
    assert matrix.add(key(1), report(6, (key(3), 400_000)), issued_at_ms=3000, now_ms=3000)
    rows = matrix.rows({key(4).hex(): 1.0}, now_ms=3000)
    assert rows == {key(1).hex(): {key(3).hex(): 0.4}, OWN.hex(): {key(4).hex(): 1.0}}


def test_matrix_drops_reports_older_than_max_age() -> None:
    matrix = TrustMatrix(OWN, max_age_s=10)
    assert not matrix.add(key(1), report(1, (key(2), PPM)), issued_at_ms=0, now_ms=10_001)
    assert matrix.add(key(1), report(1, (key(2), PPM)), issued_at_ms=5_000, now_ms=5_000)
    assert key(1).hex() in matrix.rows({}, now_ms=15_000)
    assert key(1).hex() not in matrix.rows({}, now_ms=15_001)
    assert len(matrix) == 0


def test_matrix_ignores_own_reports_and_self_entries() -> None:
    matrix = TrustMatrix(OWN, max_age_s=600)
    assert not matrix.add(OWN, report(1, (key(1), PPM)), issued_at_ms=0, now_ms=0)
    # check_envelope refuses self-entries on the wire; the matrix drops them anyway
    matrix.add(key(1), report(1, (key(1), 500_000), (key(2), 500_000)), issued_at_ms=0, now_ms=0)
    rows = matrix.rows({OWN.hex(): 1.0, key(1).hex(): 1.0}, now_ms=0)
    assert rows == {key(1).hex(): {key(2).hex(): 0.5}, OWN.hex(): {key(1).hex(): 1.0}}


def test_matrix_memory_is_bounded_and_evicts_the_least_trusted() -> None:
    trust = {key(1).hex(): 0.5, key(2).hex(): 0.3}
    matrix = TrustMatrix(OWN, max_age_s=600, max_senders=2, priority=lambda s: trust.get(s, 0.0))
    matrix.add(key(1), report(1), issued_at_ms=0, now_ms=0)
    matrix.add(key(2), report(1), issued_at_ms=0, now_ms=0)
    # a fresh key with no trust does not push out trusted senders
    assert not matrix.add(key(3), report(1), issued_at_ms=1, now_ms=1)
    trust[key(3).hex()] = 0.4
    assert matrix.add(key(3), report(1), issued_at_ms=1, now_ms=1)
    assert {held.sender for held in matrix.reports()} == {key(1).hex(), key(3).hex()}
    assert len(matrix) == 2


@pytest.mark.parametrize("weights", [[0.5, 0.25, 0.25], [1e-9, 1.0], [1.0] * 7])
def test_ppm_never_exceeds_a_million(weights: list[float]) -> None:
    assert sum(to_ppm(weights)) == PPM
