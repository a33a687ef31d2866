"""SKILL.md bundles on the market, two real nodes in process (libp2p, eth-tester): the listing
shows the front matter only, the purchase delivers the canonical bundle under its content hash,
and a skill the seller deleted is no longer sold (nothing is paid)."""

from __future__ import annotations

import pytest

from node.market.purchase.buyer import PurchaseRefused
from protocol import skill_bundle as sb
from tests.support.market import BUYER_USDC, Market

SKILL_MD = """---
name: rotate-leaked-key
description: Rotate a leaked cloud access key. Use when a key shows up in a public repository.
---
1. Disable the key. 2. Issue a new one. 3. Search the logs for use of the old key."""


async def test_bundle_is_listed_by_front_matter_and_delivered_whole(market: Market) -> None:
    bundle = sb.build(SKILL_MD, {"scripts/find-uses.sh": "grep -r \"$OLD_KEY\" /var/log\n"})
    listing = await market.publish(bundle.encode())
    await market.known_to_buyer(listing)
    seen = await market.buyer.memory.run(market.buyer.listings.get, listing["listing_id"])
    assert seen is not None
    assert (seen.listing.name, seen.listing.description) == (
        "rotate-leaked-key", "Rotate a leaked cloud access key. Use when a key shows up in a public "
        "repository.")
    assert seen.listing.content_hash == bundle.content_hash()

    bought = await market.buyer.market.buy(listing["listing_id"])
    crystal = await market.buyer.memory.get(bought["crystal_id"])
    assert sb.decode(crystal.text) == bundle and crystal.hash == bundle.content_hash()

    # The seller forgets the skill: it is not for sale any more, and nothing is paid.
    await market.seller.memory.delete(listing["crystal_id"])
    before = await market.balances()
    with pytest.raises(PurchaseRefused):
        await market.buyer.market.buy(listing["listing_id"], again=True)
    assert await market.balances() == before
    assert before[1] == BUYER_USDC - listing["price_micro_usdc"]
