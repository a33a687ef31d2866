"""SKILL.md bundles on the market, two real nodes in process (libp2p, eth-tester): the listing
shows the front matter only, the purchase delivers the canonical bundle under its content hash,
a skill the seller deleted is no longer sold (nothing is paid), and a real-sized skill (issue 39:
about 180 KiB, larger than the old 64 KiB bundle) is added from its folder, listed small and
bought whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.market import market_bundle
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


def _real_sized_folder(root: Path) -> Path:
    """A skill shaped like a large published one (issue 39): SKILL.md, scripts and references,
    about 180 KiB in all with one reference of 100 KiB (over the old 64 KiB bundle, 48 KiB file)."""
    folder = root / "pg-replica-recovery"
    (folder / "scripts").mkdir(parents=True)
    (folder / "references").mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: pg-replica-recovery\ndescription: Rebuild a PostgreSQL replica that fell behind. "
        "Use when replication lag grows without bound.\n---\n# Replica recovery\n\nRead references/ first.\n")
    (folder / "scripts" / "resync.sh").write_text("pg_basebackup -D /var/lib/postgresql/data -R\n" * 400)
    (folder / "references" / "runbook.md").write_text(
        "".join(f"Step {index}: check pg_stat_replication and the WAL position on the primary.\n"
                for index in range(1300)))
    (folder / "references" / "settings.md").write_text("wal_keep_size = 1GB  # keep WAL for the replica\n" * 1000)
    return folder


async def test_real_sized_skill_is_added_listed_and_bought_whole(market: Market, tmp_path: Path) -> None:
    bundle, note = market_bundle(_real_sized_folder(tmp_path))
    text = bundle.encode()
    assert note is None and 150 * 1024 < len(text.encode()) <= sb.MAX_BUNDLE_BYTES
    assert max(len(content.encode()) for _, content in bundle.resources) > 64 * 1024
    listing = await market.publish(text)
    await market.known_to_buyer(listing)
    seen = await market.buyer.memory.run(market.buyer.listings.get, listing["listing_id"])
    assert seen is not None and seen.listing.size_bytes == len(text.encode())
    # The listing carries the front matter's name and description, never the paid content.
    assert len(seen.envelope) < 2048 and b"pg_stat_replication" not in seen.envelope
    assert b"pg_basebackup" not in seen.envelope

    bought = await market.buyer.market.buy(listing["listing_id"])
    assert bought["ingested"] and bought["scan"]["verdict"] == "ok"
    crystal = await market.buyer.memory.get(bought["crystal_id"])
    assert sb.decode(crystal.text) == bundle and crystal.hash == bundle.content_hash()
