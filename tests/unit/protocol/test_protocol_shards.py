"""Listing shards and provider keys (protocol.topics): the ids a foreign client must compute."""

from __future__ import annotations

import hashlib

import pytest

from protocol.topics import (
    check_shards,
    listing_shard,
    listings_topic,
    normalize_term,
    on_network,
    provider_key,
    shard_of_topic,
)


def test_the_shard_is_sha256_of_the_normalised_category_mod_s() -> None:
    digest = hashlib.sha256(b"crystalmesh/listing-shard/v1\x00devops tools").digest()
    expected = int.from_bytes(digest[:8], "big") % 64
    assert listing_shard("  DevOps   Tools ", 64) == expected
    assert normalize_term("  DevOps   Tools ") == "devops tools"


def test_doubling_s_splits_each_shard_in_two() -> None:
    for index in range(200):
        category = f"category-{index}"
        assert listing_shard(category, 32) % 16 == listing_shard(category, 16)


def test_shard_topics_round_trip_and_name_s() -> None:
    topic = listings_topic(5, 16)
    assert topic == "/crystalmesh/devnet/1/listings/16/5"
    assert shard_of_topic(topic) == (5, 16)
    assert on_network(topic, "mainnet") == "/crystalmesh/mainnet/1/listings/16/5"
    for bad in ("/crystalmesh/devnet/1/listings/16/16", "/crystalmesh/devnet/1/listings/12/1",
                "/crystalmesh/devnet/1/listings/16", "/crystalmesh/devnet/1/skills"):
        assert shard_of_topic(bad) is None


@pytest.mark.parametrize("shards", [0, 3, 12, 8192, -4])
def test_a_shard_count_is_a_power_of_two_up_to_4096(shards: int) -> None:
    with pytest.raises(ValueError):
        check_shards(shards)


def test_provider_keys_are_per_normalised_term() -> None:
    assert provider_key("Postgres") == provider_key(" postgres ")
    assert provider_key("postgres") != provider_key("postgresql")
    assert provider_key("postgres") == hashlib.sha256(b"crystalmesh/provider/v1\x00postgres").digest()
