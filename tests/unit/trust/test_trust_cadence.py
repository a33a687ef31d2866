"""The trust report cadence (node/trust/cadence.py): a per-node budget flat in network size."""

from __future__ import annotations

import hashlib

import pytest

from node.net.dht import dht_size_estimate
from node.trust import cadence
from protocol.messages import TrustEntry, TrustReport

A, B, C = (bytes([i]) * 32 for i in (1, 2, 3))


def report(*entries: tuple[bytes, int]) -> TrustReport:
    return TrustReport(epoch=1, row=tuple(TrustEntry(peer, weight) for peer, weight in entries))


@pytest.mark.parametrize(
    ("nodes", "expected_s"),
    [(1, 10.0), (10, 10.0), (1_000, 1_000.0), (10_000, 10_000.0), (100_000, 100_000.0),
     (10**9, 604_800.0)],
)
def test_interval_grows_with_the_network_between_floor_and_ceiling(nodes: int, expected_s: float) -> None:
    # target 1 report/s received per node: N nodes each publishing every N s
    assert cadence.report_interval_s(nodes, 10.0, 1.0, 604_800.0) == expected_s


def test_received_rate_stays_at_the_target_at_any_size() -> None:
    for nodes in (1_000, 10_000, 100_000):
        interval = cadence.report_interval_s(nodes, 10.0, 2.0, 604_800.0)
        assert nodes / interval == pytest.approx(2.0)


def test_refresh_and_receiver_age_follow_the_interval() -> None:
    assert cadence.refresh_interval_s(10.0, 1800.0) == 1800.0
    assert cadence.refresh_interval_s(100_000.0, 1800.0) == 100_000.0
    # a receiver keeps three refreshes: two lost in a row do not drop the row
    assert cadence.receiver_max_age_s(1800.0, 600) == 5400.0
    assert cadence.receiver_max_age_s(100.0, 600) == 600


def test_row_change_is_l1_in_ppm_and_distrust_changes_are_material() -> None:
    assert cadence.row_change_ppm(None, report()) == 2_000_000
    assert cadence.row_change_ppm(report((A, 600_000), (B, 400_000)),
                                  report((A, 590_000), (B, 410_000))) == 20_000
    assert cadence.row_change_ppm(report((A, 1_000_000)), report((B, 1_000_000))) == 2_000_000
    # a new 0-ppm (distrust) entry is evidence, whatever its weight
    assert cadence.row_change_ppm(report((A, 1_000_000)),
                                  report((A, 1_000_000), (C, 0))) == 2_000_000


def due(since_s: float | None, change_ppm: int = 0, published: int = 5) -> bool:
    return cadence.should_publish(
        since_s, change_ppm, published, interval_s=100.0, refresh_s=1800.0,
        change_threshold_ppm=50_000, startup_reports=3,
    )


def test_should_publish() -> None:
    assert due(None)  # never published
    assert not due(99.0, change_ppm=2_000_000)  # the interval bounds even a changed row
    assert due(100.0, change_ppm=50_000)  # changed materially
    assert not due(1799.0, change_ppm=49_999)  # unchanged: wait for the refresh
    assert due(1800.0)
    assert due(100.0, published=2)  # starting up: the mesh may not have heard the first


def test_dht_size_estimate_from_the_closest_peers() -> None:
    # 10,000 nodes' keys spread as SHA-256 spreads them; seen from a handful of nodes
    keys = [hashlib.sha256(str(i).encode()).digest() for i in range(10_000)]
    for own in keys[:5]:
        estimate = dht_size_estimate(own, keys)  # own key in the list counts once (distance 0)
        assert 5_000 <= estimate <= 20_000
    assert dht_size_estimate(keys[0], []) == 1
    # Fewer than k peers: the table is the whole network, counted exactly (no formula noise
    # that would stretch a small devnet's report spacing).
    assert dht_size_estimate(keys[0], keys[1:3]) == 3
    assert dht_size_estimate(keys[0], keys[:12]) == 12
    assert dht_size_estimate(keys[0], keys[1:20]) == 20
