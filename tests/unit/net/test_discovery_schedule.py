"""When discovery walks the DHT again (node/net/discovery.py), hand-worked."""

from node.net.discovery import DiscoveryConfig, next_delay_s

CONFIG = DiscoveryConfig(target_peers=8, interval_s=30.0, fast_interval_s=2.0)


def test_fast_while_finding_peers_below_target() -> None:
    assert next_delay_s(CONFIG, 16.0, found_new=True, connected=3) == 2.0


def test_backs_off_by_doubling_when_nothing_new() -> None:
    assert next_delay_s(CONFIG, 2.0, found_new=False, connected=3) == 4.0
    assert next_delay_s(CONFIG, 16.0, found_new=False, connected=3) == 30.0
    assert next_delay_s(CONFIG, 30.0, found_new=False, connected=3) == 30.0


def test_slow_once_at_target() -> None:
    assert next_delay_s(CONFIG, 2.0, found_new=True, connected=8) == 30.0
