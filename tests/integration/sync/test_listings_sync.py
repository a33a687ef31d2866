"""Listings sync over real libp2p hosts: late joiners catch up; hostile peers are contained.

The catch-up test runs two whole nodes (``NodeService``: SQLite, listing book,
lifecycle, trust, API) in one trio run; the attack tests put a hostile
``NetService`` that answers ``/crystalmesh/listings-sync/1`` with crafted bytes
in front of an honest one.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import trio

from node.config import load_config
from node.init import init_node
from node.net.listing_sync import SyncLimits
from node.net.service import NetService
from node.service import NodeService
from protocol.envelope import Envelope, open_envelope, seal, sign_envelope
from protocol.identity import Identity
from protocol.liveness import ListingsSyncPage
from protocol.messages import SkillListing
from protocol.topics import SKILLS
from tests.support.net import make_listing, make_net
from tests.support.wait import wait_until_async

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def node_service(root: Path, name: str, bootstrap: list[str] | None = None) -> NodeService:
    init_node(root / name, name=name, embedder="hashing", listen="/ip4/127.0.0.1/tcp/0",
              api_port=0, bootstrap=bootstrap or [])
    return NodeService(load_config(root / name, environ={}))


def listings(sellers: int, each: int) -> list[bytes]:
    out = []
    for s in range(sellers):
        seller = Identity.generate()
        for i in range(each):
            issued = now_ms() - 30_000  # announced a little while ago
            listing = make_listing(seller, name=f"skill-{s}-{i}", now_ms=issued)
            out.append(seal(seller, SkillListing.KIND, listing, issued * 1000 + i, issued))
    return out


async def test_a_node_started_after_200_listings_exist_has_all_of_them(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    old = node_service(tmp_path, "old")
    await nursery.start(old.run)
    for data in listings(sellers=20, each=10):
        envelope = old.net.validator.check(SKILLS, data, "test")  # as if gossiped to it
        await old.intake.take(envelope)
    assert await old.memory.run(old.listings.count) == 200

    started = trio.current_time()
    late = node_service(tmp_path, "late", bootstrap=[old.net.listen_addrs()[0]])
    await nursery.start(late.run)
    with trio.fail_after(60):
        while await late.memory.run(late.listings.count) < 200:
            await trio.sleep(0.02)
    elapsed = trio.current_time() - started
    log.warning("late joiner caught up with 200 listings in %.2f s (node start included)", elapsed)
    print(f"\nCATCH-UP 200 listings: {elapsed:.2f} s from start of the late node")
    sessions = late.net.sync_status()["sessions"]
    assert sum(s["accepted"] for s in sessions) == 200
    assert all(s["rejected"] == 0 for s in sessions)
    # The synced listings are searchable like gossiped ones.
    hits = await late.market.search_listings("skill-7-3", k=1)
    assert hits and hits[0]["name"] == "skill-7-3"


# --- hostile peers ----------------------------------------------------------------------------

SMALL = SyncLimits(request_timeout_s=1.5, resync_s=3600.0, poll_s=0.05)


async def victim_and_attacker(nursery: trio.Nursery, answer: Any
                              ) -> tuple[NetService, NetService, list[Envelope]]:
    """An honest node that syncs on connect, and an attacker whose sync server is ``answer``."""
    accepted: list[Envelope] = []
    victim = make_net(sync_limits=SMALL)
    own = listings(1, 3)

    async def source(cursor: int, limit: int, max_bytes: int, scope: object = None) -> tuple[list[bytes], int, bool]:
        return own[cursor:cursor + limit], min(len(own), cursor + limit), cursor + limit < len(own)

    async def on_listing(envelope: Envelope) -> None:
        accepted.append(envelope)

    victim.on_listing(on_listing)
    victim.serve_listings_sync(source)
    await nursery.start(victim.run)
    attacker = make_net()
    attacker.sync.transport.serve(lambda peer, envelope: answer(attacker, envelope))
    await nursery.start(attacker.run)
    attacker.connect(victim.listen_addrs()[0])
    return victim, attacker, accepted


def page(attacker: NetService, entries: list[bytes], more: bool = False, cursor: int = 1) -> bytes:
    body = {"entries": entries, "next_cursor": cursor, "more": more}
    return sign_envelope(attacker.identity, ListingsSyncPage.KIND, 1, body,
                         attacker.sequence.next(), now_ms()).to_bytes()


async def still_serves(victim: NetService, nursery: trio.Nursery) -> None:
    """An honest newcomer still gets the victim's listings, by sync."""
    got: list[Envelope] = []
    honest = make_net()

    async def on_listing(envelope: Envelope) -> None:
        got.append(envelope)

    async def nothing(cursor: int, limit: int, max_bytes: int, scope: object = None) -> tuple[list[bytes], int, bool]:
        return [], cursor, False

    honest.on_listing(on_listing)
    honest.serve_listings_sync(nothing)
    await nursery.start(honest.run)
    honest.connect(victim.listen_addrs()[0])
    await wait_until_async(lambda: len(got) == 3, 30, "the honest newcomer to sync 3 listings")


async def test_forged_entries_cost_the_serving_peer_and_are_never_applied(
        nursery: trio.Nursery) -> None:
    mallory = Identity.generate()

    async def forged(attacker: NetService, request: Envelope) -> bytes:
        entries = []
        for i in range(10):
            listing = make_listing(mallory, name=f"forged-{i}", now_ms=now_ms())
            good = seal(mallory, SkillListing.KIND, listing, i + 1, now_ms())
            signature = open_envelope(good).signature
            entries.append(good.replace(signature, bytes(64)))  # signature broken
        return page(attacker, entries)

    victim, attacker, accepted = await victim_and_attacker(nursery, forged)
    await wait_until_async(lambda: victim.is_banned(attacker.peer_id), 30, "the forger to be banned")
    report = victim.sync.reports[-1]
    assert report.rejected == 3 and report.stopped == "too_many_rejects"  # stopped early
    assert accepted == []
    assert victim.rejection_counts(attacker.peer_id).get("bad_signature") == 3
    await still_serves(victim, nursery)


async def test_oversized_and_overfull_pages_are_refused(nursery: trio.Nursery) -> None:
    calls: list[int] = []

    async def overfull(attacker: NetService, request: Envelope) -> bytes:
        calls.append(1)
        good = listings(1, 1)[0]
        if len(calls) == 1:
            return page(attacker, [good] * 129, more=True)  # over MAX_SYNC_PAGE_ITEMS
        return page(attacker, [b"\x00" * 40_000], more=True)  # an entry over 32 KiB

    victim, attacker, accepted = await victim_and_attacker(nursery, overfull)
    await wait_until_async(lambda: victim.sync.reports, 30, "a sync session")
    assert victim.sync.reports[-1].stopped.startswith("failed")
    assert victim.score(attacker.peer_id) < 0
    assert accepted == []
    # The next session (forced now) is refused too, and charged again.
    before = victim.score(attacker.peer_id)
    report = await victim.sync.sync_with(attacker.peer_id)
    assert report.stopped.startswith("failed") and report.accepted == 0
    assert victim.score(attacker.peer_id) < before
    await still_serves(victim, nursery)


async def test_a_peer_that_pages_forever_is_cut_at_the_session_limits(
        nursery: trio.Nursery) -> None:
    replay = listings(1, 1)

    async def endless(attacker: NetService, request: Envelope) -> bytes:
        assert isinstance(request.message().cursor, int)
        return page(attacker, replay, more=True, cursor=request.message().cursor + 1)

    victim, attacker, accepted = await victim_and_attacker(nursery, endless)
    await wait_until_async(lambda: victim.sync.reports, 60, "a sync session")
    report = victim.sync.reports[-1]
    assert report.pages == SMALL.max_pages and report.stopped == "max_pages"
    assert len(accepted) == 64  # the same listing 64 times, ignored by the book downstream

    async def stuck(attacker: NetService, request: Envelope) -> bytes:
        return page(attacker, [], more=True, cursor=0)  # a cursor that does not advance

    attacker.sync.transport.serve(lambda peer, envelope: stuck(attacker, envelope))
    report = await victim.sync.sync_with(attacker.peer_id)
    assert report.stopped == "sync_overrun" and report.pages == 1


async def test_a_stalling_peer_times_out_is_penalised_and_the_node_keeps_serving(
        nursery: trio.Nursery) -> None:
    async def stall(attacker: NetService, request: Envelope) -> bytes:
        await trio.sleep_forever()
        raise AssertionError

    victim, attacker, _ = await victim_and_attacker(nursery, stall)
    await wait_until_async(lambda: victim.sync.reports, 30, "the stalled session to end")
    assert victim.sync.reports[-1].stopped == "sync_stalled"
    assert victim.score(attacker.peer_id) < 0  # peer score only: not trust evidence
    assert victim.rejection_counts(attacker.peer_id) == {}
    await still_serves(victim, nursery)
