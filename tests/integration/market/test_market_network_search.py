"""Market search with listing shards: a thin local book asks the network (NodeService nodes).

The buyer follows another category than the seller's, so the seller's listing never
reaches it by gossip; its search finds the seller's provider record in the DHT and syncs.
"""

from __future__ import annotations

from pathlib import Path

import trio

from node.chain.embedded import EmbeddedChain
from protocol.topics import listing_shard, provider_key
from tests.support.market import start_node
from tests.support.wait import wait_until_async

SHARDS = 16


def other_category() -> str:
    return next(f"cooking-{i}" for i in range(100)
                if listing_shard(f"cooking-{i}", SHARDS) != listing_shard("ops", SHARDS))


async def test_a_thin_search_asks_the_network_and_finds_the_sellers_listing(
    tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery,
) -> None:
    def overrides(interests: list[str]) -> dict[str, object]:
        return {"net": {"listing_shards": SHARDS}, "market": {"interests": interests}}

    seller = await start_node(tmp_path, "seller", chain, nursery, overrides(["ops"]))
    buyer = await start_node(tmp_path, "buyer", chain, nursery, overrides([other_category()]))
    buyer.net.connect(seller.net.listen_addrs()[0])
    await wait_until_async(lambda: seller.identity.peer_id in buyer.net.connected_peers(), 60,
                           "buyer connected to the seller")
    # The sync on connection is over before the listing exists (the next one is 5 min away).
    await wait_until_async(lambda: any(report.peer_id == seller.identity.peer_id
                                       for report in buyer.net.sync.reports), 60,
                           "the buyer's first listings sync with the seller")
    crystal = await seller.memory.add_from_request({
        "text": "Rotate the postgres WAL archive and verify the restore point.",
        "type": "skill", "scope": "public", "category": "ops", "tags": ["ops"]})
    for _ in range(seller.config.market.min_executions):
        await seller.market.record_execution(crystal.id, True, 0.9)
    listing = await seller.market.publish_skill(crystal.id)
    assert buyer.net.discovery is not None
    store = buyer.net.discovery.dht.provider_store
    await wait_until_async(lambda: bool(store.get_providers(provider_key("ops"))), 60,
                           "the seller's provider record for 'ops' placed")
    assert await buyer.memory.run(buyer.listings.get, listing["listing_id"]) is None

    results = await buyer.market.search_listings("postgres WAL restore", category="ops")

    assert [r["listing_id"] for r in results] == [listing["listing_id"]]
    report = buyer.net.last_network_search
    assert report is not None and report["accepted"] >= 1 and not report["timed_out"], report
