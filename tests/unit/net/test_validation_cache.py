"""The pubsub validation cache in constant time (node.net.libp2p_tuning, 15.), on a real
node's Pubsub: same verdicts, TTL and least-recently-used eviction as py-libp2p 0.8.1's,
without scanning every cached id on each put. Also: the tuning refuses another py-libp2p."""

from __future__ import annotations

import time

import pytest
from libp2p.pubsub.pubsub import ValidationResult

from node.net.libp2p_tuning import check_version
from tests.support.net import make_net

compared = 0


class CountingId(bytes):
    """A message id that counts how often it is compared for equality."""

    def __eq__(self, other: object) -> bool:
        global compared
        compared += 1
        return bytes.__eq__(self, other)  # type: ignore[arg-type]

    __hash__ = bytes.__hash__


def _valid(at: float | None = None) -> ValidationResult:
    return ValidationResult(is_valid=True, timestamp=time.time() if at is None else at)


def test_a_put_into_a_full_cache_does_not_scan_the_cached_ids() -> None:
    global compared
    cache = make_net().pubsub.validation_cache
    for index in range(cache.max_size):  # the node's size: GossipConfig.validation_cache_size
        cache.put(index.to_bytes(32, "big"), _valid())
    compared = 0
    cache.put(CountingId(b"\xff" * 32), _valid())
    # 0.8.1's list-ordered cache compares the new id with all 4,096 cached ids.
    assert compared <= 2
    assert cache.get(b"\xff" * 32) is not None


def test_verdicts_expire_and_the_least_recently_used_go_first() -> None:
    cache = make_net().pubsub.validation_cache
    cache.max_size = 3
    cache.put(b"a", _valid())
    cache.put(b"b", _valid())
    cache.put(b"c", _valid())
    assert cache.get(b"a") is not None  # a is now the most recently used
    cache.put(b"d", _valid())  # full: b, the least recently used, goes
    assert cache.get(b"b") is None
    assert all(cache.get(key) is not None for key in (b"a", b"c", b"d"))
    cache.put(b"old", _valid(at=time.time() - cache.ttl - 1))
    assert cache.get(b"old") is None  # older than the TTL: no verdict
    cache.put(b"c", ValidationResult(is_valid=False, timestamp=time.time()))
    verdict = cache.get(b"c")
    assert verdict is not None and not verdict.is_valid  # a second put replaces the first


def test_another_py_libp2p_version_is_refused() -> None:
    check_version("0.8.1")
    with pytest.raises(RuntimeError, match=r"0\.8\.1"):
        check_version("0.9.0")
