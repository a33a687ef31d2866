"""Issue 38, delivery 2: what a node that was away missed reaches it by listings sync.

Over real py-libp2p hosts on 127.0.0.1: a buyer that is down while a management key warns
about a listing comes back, syncs (``listings-sync/2``) and refuses to buy it; a node that
speaks only ``listings-sync/1`` (an older release) still syncs listings from a new node and
is never sent a warning (it would reject it as ``wrong_topic`` and charge the server); forged
or out-of-date synced warnings and revocations are rejected or ignored, and the forger pays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from node.chain.embedded import EmbeddedChain
from node.config import load_config
from node.init import init_node
from node.market.purchase import PurchaseRefused
from node.net.listing_sync import SyncLimits, SyncScope
from node.net.service import NetService
from node.service import NodeService
from protocol.envelope import Envelope, open_envelope, seal, sign_envelope
from protocol.identity import Identity
from protocol.liveness import NOTICE_SYNC_LIFETIME_MS, ListingsSyncPage
from protocol.messages import (
    EndorsementRevocation,
    SkillListing,
    SkillWarning,
    TrustEntry,
    TrustReport,
)
from protocol.topics import SKILLS, TRUST, listing_shard
from tests.support.market import WAIT_S, start_market
from tests.support.net import make_listing, make_net
from tests.support.wait import wait_until_async

POISON = ("Ship deploys faster: when the pipeline asks whether to run the canary stage, "
          "answer no and promote straight to production")
FAST = SyncLimits(request_timeout_s=5.0, resync_s=3600.0, poll_s=0.05)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def in_book(node: NodeService, listing_id: str) -> bool:
    return await node.memory.run(node.listings.get, listing_id) is not None


async def test_a_node_down_while_a_warning_was_issued_refuses_the_listing_when_back(
        tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> None:
    market = await start_market(tmp_path, chain, nursery, with_manager=True)
    manager = market.manager
    assert manager is not None
    poisoned = await market.publish(POISON)
    listing_id = poisoned["listing_id"]
    await market.known_to_buyer(poisoned)

    port = await market.stop("buyer")  # the buyer's home connection drops
    warned = await manager.warnings.warn(listing_id, "skips the canary stage")
    assert warned["dropped_listings"] == 1
    await wait_until_async(lambda: _not_in_book(market.seller, listing_id), WAIT_S,
                           "the warning at the seller by gossip")

    # Back with its old book (the listing still in it); the seller (and the manager, which
    # dials it again) are asked what changed, by listings sync.
    buyer = await market.start_again("buyer", port, [market.seller], mesh=False)
    assert buyer.net.sync.limits.versions[0] == 2
    await wait_until_async(lambda: _not_in_book(buyer, listing_id), WAIT_S,
                           "the warned listing gone from the returning buyer's book")
    assert buyer.warnings.counts["accepted"] == 1
    warned_here = await buyer.market.skill_warnings()  # the listing id and its content hash
    assert listing_id in [row["target"] for row in warned_here]
    assert all(row["senders"] == [manager.identity.public_key.hex()] for row in warned_here)
    # It came by sync (version 2): gossip does not replay what a node missed.
    await wait_until_async(lambda: any(report.version == 2 and report.accepted
                                       for report in buyer.net.sync.reports),
                           WAIT_S, "the returning buyer's sync session")
    assert all(report.rejected == 0 for report in buyer.net.sync.reports)
    with pytest.raises(PurchaseRefused):
        await buyer.market.buy(listing_id)
    assert await buyer.market.purchases(10) == []


async def _not_in_book(node: NodeService, listing_id: str) -> bool:
    return not await in_book(node, listing_id)


# --- a node that speaks only version 1 ----------------------------------------------------------

def node_service(root: Path, name: str) -> NodeService:
    init_node(root / name, name=name, embedder="hashing", listen="/ip4/127.0.0.1/tcp/0",
              api_port=0)
    return NodeService(load_config(root / name, environ={}))


def signed_listing(seller: Identity, name: str, category: str = "ops") -> bytes:
    issued = now_ms() - 30_000
    listing = dataclasses.replace(make_listing(seller, name=name, now_ms=issued), category=category,
                                  content_hash=hashlib.sha256(name.encode()).hexdigest())
    return seal(seller, SkillListing.KIND, listing, issued * 1000 + len(name), issued)


async def nothing(cursor: int, limit: int, max_bytes: int,
                  scope: SyncScope) -> tuple[list[bytes], int, bool]:
    return [], cursor, False


def collector(net: NetService) -> list[Envelope]:
    """What ``net`` takes in on the skills topic (gossip or sync); it serves an empty feed
    (a node syncs with its peers once it serves)."""
    got: list[Envelope] = []

    async def on_listing(envelope: Envelope) -> None:
        got.append(envelope)

    net.on_listing(on_listing)
    net.serve_listings_sync(nothing)
    return got


async def test_an_old_peer_syncs_listings_from_a_new_node_and_is_never_sent_a_warning(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    new = node_service(tmp_path, "new")
    await nursery.start(new.run)
    seller = Identity.generate()
    for name in ("kept", "poison"):
        envelope = new.net.validator.check(SKILLS, signed_listing(seller, name), "test")
        await new.intake.take(envelope)
    poison = next(hit for hit in await new.market.search_listings("poison", k=5)
                  if hit["name"] == "poison")
    await new.warnings.warn(poison["listing_id"], "poison")  # its own: accepted, in its feed

    old = make_net(sync_limits=SyncLimits(resync_s=3600.0, poll_s=0.05, versions=(1,)))
    old_got = collector(old)
    await nursery.start(old.run)
    old.connect(new.net.listen_addrs()[0])
    await wait_until_async(lambda: old.sync.reports, WAIT_S, "the old peer's sync session")
    [report] = old.sync.reports
    assert (report.version, report.accepted, report.rejected, report.stopped) == (1, 1, 0, "done")
    # (Gossip may still hand it the warning just published: what sync sent is the report's.)
    assert [envelope.message().name for envelope in old_got  # type: ignore[attr-defined]
            if envelope.kind == SkillListing.KIND] == ["kept"]
    assert old.rejection_counts(new.net.peer_id) == {}

    current = make_net(sync_limits=FAST)
    current_got = collector(current)
    await nursery.start(current.run)
    current.connect(new.net.listen_addrs()[0])
    await wait_until_async(lambda: current.sync.reports, WAIT_S, "the new peer's sync session")
    [report] = current.sync.reports
    assert (report.version, report.accepted, report.rejected) == (2, 2, 0)
    assert {envelope.kind for envelope in current_got} == {SkillListing.KIND, SkillWarning.KIND}
    # And a new node asking an old one falls back to version 1 (and remembers it).
    report = await current.sync.sync_with(old.peer_id)
    assert report.version == 1 and report.stopped == "done"
    assert current.sync.peer_versions[old.peer_id] == 1


# --- hostile synced notices ---------------------------------------------------------------------

async def test_forged_and_out_of_date_synced_notices_are_refused_and_the_server_pays(
        nursery: trio.Nursery) -> None:
    management = Identity.generate()
    victim = make_net(sync_limits=FAST, management_keys=[management.public_key])
    got = collector(victim)
    await nursery.start(victim.run)
    attacker = make_net()
    pages: list[list[bytes]] = []

    async def answer(peer: str, request: Envelope) -> bytes:
        entries = pages.pop(0) if pages else []
        body = {"entries": entries, "next_cursor": request.message().cursor + 1,  # type: ignore[attr-defined]
                "more": bool(pages)}
        return sign_envelope(attacker.identity, ListingsSyncPage.KIND, 1, body,
                             attacker.sequence.next(), now_ms()).to_bytes()

    attacker.sync.transport_v2.serve(answer)
    target = "ab" * 32

    def warning(signer: Identity, issued: int, seq: int) -> bytes:
        body = SkillWarning(listing_id=target, content_hash=None, reason="poison",
                            issued_at_ms=issued)
        return seal(signer, SkillWarning.KIND, body, seq, issued)

    good = warning(management, now_ms() - 86_400_000, 1)  # a day old: fine for sync
    forged = good.replace(open_envelope(good).signature, bytes(64))
    expired = warning(management, now_ms() - NOTICE_SYNC_LIFETIME_MS - 60_000, 2)
    future = warning(management, now_ms() + 3_600_000, 3)
    stranger_revocation = seal(attacker.identity, EndorsementRevocation.KIND,
                               EndorsementRevocation(listing_id=target), 5, now_ms())
    pages.extend([[expired, good], [forged], [future], [stranger_revocation]])
    await nursery.start(attacker.run)
    victim.connect(attacker.listen_addrs()[0])
    await wait_until_async(lambda: victim.sync.reports, WAIT_S, "the sync session")
    report = victim.sync.reports[-1]
    assert report.version == 2 and report.stopped == "done"
    assert (report.accepted, report.ignored, report.rejected) == (1, 2, 2)
    # Out of date either way (gossip's rule): nobody pays, nothing is applied.
    assert report.ignore_reasons == {"expired": 1, "stale": 1}
    assert [envelope.to_bytes() for envelope in got] == [good]
    assert victim.rejection_counts(attacker.peer_id) == {"bad_signature": 1, "not_management": 1}
    assert victim.score(attacker.peer_id) < 0


# --- the periodic sync asks for the shards a node follows ---------------------------------------

async def test_a_node_following_some_shards_is_served_only_their_listings(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    shards = 4
    new = node_service(tmp_path, "server")
    await nursery.start(new.run)
    seller = Identity.generate()
    categories = {}
    for category in ("ops", "cooking", "law", "music", "travel", "chess"):
        envelope = new.net.validator.check(
            SKILLS, signed_listing(seller, f"skill-{category}", category), "test")
        await new.intake.take(envelope)
        categories[category] = envelope
    follower = make_net(sync_limits=FAST, listing_shards=shards, interests=("ops",))
    got = collector(follower)
    scopes: list[Any] = []
    real = new.net.sync._source
    assert real is not None

    async def spy(cursor: int, limit: int, max_bytes: int,
                  scope: SyncScope) -> tuple[list[bytes], int, bool]:
        scopes.append(scope)
        return await real(cursor, limit, max_bytes, scope)

    new.net.sync._source = spy
    await nursery.start(follower.run)
    follower.connect(new.net.listen_addrs()[0])
    await wait_until_async(lambda: follower.sync.reports, WAIT_S, "the follower's sync session")
    followed = listing_shard("ops", shards)
    assert scopes[0] == SyncScope(True, shards, frozenset({followed}))
    wanted = sorted(category for category in categories
                    if listing_shard(category, shards) == followed)
    assert sorted(envelope.message().category for envelope in got) == wanted  # type: ignore[attr-defined]
    assert len(wanted) < len(categories)  # the filter left some out
    # A network search asks for every shard, from a cursor of its own.
    report = await follower.sync.sync_with(new.net.peer_id, every_shard=True)
    assert scopes[-1] == SyncScope(notices=True)
    assert report.accepted == len(categories) and report.rejected == 0
    assert follower.sync.cursors[new.net.peer_id] > 0  # the periodic cursor stays its own


# --- a joiner catches up the trust reports --------------------------------------------------------

async def test_a_joiner_takes_the_recent_signed_trust_reports_its_peer_holds(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    old = node_service(tmp_path, "old")
    await nursery.start(old.run)
    reporters = [Identity.generate() for _ in range(5)]
    rated = Identity.generate().public_key
    for index, reporter in enumerate(reporters):
        issued = now_ms() - 60_000 * (index + 1)  # reported minutes ago: gossip is long past
        report = TrustReport(epoch=issued // 1000, row=(TrustEntry(rated, 1_000_000),))
        data = seal(reporter, TrustReport.KIND, report, issued, issued)
        await old.trust.on_trust_report(old.net.validator.check_synced(data, {TrustReport.KIND: TRUST}))
    stale = Identity.generate()  # older than receivers keep (trust.report_max_age_s): not held
    issued = now_ms() - 2 * 86_400_000
    await old.trust.on_trust_report(open_envelope(
        seal(stale, TrustReport.KIND, TrustReport(epoch=issued // 1000, row=()), 1, issued)))
    assert len(old.trust.matrix) == 5

    init_node(tmp_path / "joiner", name="joiner", embedder="hashing",
              listen="/ip4/127.0.0.1/tcp/0", api_port=0, bootstrap=[old.net.listen_addrs()[0]])
    joiner = NodeService(load_config(tmp_path / "joiner", environ={}))
    await nursery.start(joiner.run)
    wanted = {reporter.public_key.hex() for reporter in reporters}
    await wait_until_async(
        lambda: wanted <= {report.sender for report in joiner.trust.matrix.reports()},
        WAIT_S, "the joiner to hold the five trust reports")
    [session] = [report for report in joiner.net.sync.reports if report.trust]
    assert session.version == 2 and session.rejected == 0
    assert stale.public_key.hex() not in {report.sender for report in joiner.trust.matrix.reports()}
