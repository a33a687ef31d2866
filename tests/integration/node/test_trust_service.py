"""TrustService over a real database file: persistence, gossip envelopes, the run loop."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from node.config import NodeConfig
from node.db import Database
from node.net.rules.validation import Rejection
from node.trust import schema as trust_schema
from node.trust.ledger import TrustEvent
from node.trust.levels import TrustLevel
from node.trust.service import TrustService, trust_rows_for_api
from protocol.envelope import open_envelope, seal
from protocol.identity import Identity, peer_id_from_public_key
from protocol.messages import PPM, TrustEntry, TrustReport
from tests.support.clock import HandClock

NOW_MS = 1_700_000_000_000


def make(
    path: Path,
    own: Identity,
    management: Identity,
    clock: object = lambda: NOW_MS,
    config: NodeConfig | None = None,
    network_size: int = 1,
) -> TrustService:
    return TrustService(
        Database(path),
        config or NodeConfig(),
        own.public_key,
        {management.public_key},
        lambda: False,
        clock=clock,  # type: ignore[arg-type]
        network_size=lambda: network_size,
    )


def test_ledger_and_bans_survive_a_restart(tmp_path: Path) -> None:
    own, management, seller, cheat = (Identity.generate() for _ in range(4))
    trust = make(tmp_path / "crystals.db", own, management)
    check = Database(tmp_path / "crystals.db")
    assert check.schema_version("trust") == trust_schema.SCHEMA_VERSION
    check.close()
    trust.record(seller.public_key, TrustEvent.DELIVERED_OK)
    trust.record(seller.public_key, TrustEvent.EXECUTION_SUCCESS)
    for _ in range(3):
        trust.on_rejection(Rejection(cheat.peer_id, "bad_signature", "/crystalmesh/1/skills"))
    trust.flush_rejections()
    trust.gate(cheat.public_key)
    trust.ledger.db.close()

    again = make(tmp_path / "crystals.db", own, management)
    assert again.level(cheat.public_key) is TrustLevel.BANNED
    assert again.peers_to_ban() == [cheat.public_key]
    assert dict(again.ledger.normalised_row()) == {seller.public_key.hex(): 1.0}
    assert again.ledger.decisions(cheat.public_key)[0]["reason"] == "banned"
    again.ledger.db.close()


async def test_reports_from_gossip_envelopes_feed_eigentrust(tmp_path: Path) -> None:
    own, management, seller, sybil = (Identity.generate() for _ in range(4))
    trust = make(tmp_path / "crystals.db", own, management)
    vouch = TrustReport(epoch=1, row=(TrustEntry(seller.public_key, PPM),))
    praise = TrustReport(epoch=1, row=(TrustEntry(seller.public_key, PPM),))
    await trust.on_trust_report(open_envelope(seal(management, "trust_report", vouch, 1, NOW_MS)))
    await trust.on_trust_report(open_envelope(seal(sybil, "trust_report", praise, 1, NOW_MS)))
    # our own report echoed back is ignored
    await trust.on_trust_report(open_envelope(seal(own, "trust_report", vouch, 1, NOW_MS)))
    assert len(trust.matrix) == 2
    result = await trust.recompute_async()
    assert result.converged
    assert result.trust[seller.public_key.hex()] > result.trust[sybil.public_key.hex()] == 0.0
    rows = {row["peer_key"]: row for row in trust_rows_for_api(trust)}
    assert rows[seller.public_key.hex()]["peer_id"] == peer_id_from_public_key(seller.public_key)
    assert rows[management.public_key.hex()]["level"] == "verified"
    trust.ledger.db.close()


async def test_run_publishes_reports_and_hands_out_bans(tmp_path: Path) -> None:
    # Real clock with a short interval: an autojump clock races the worker threads
    # that recompute runs in, and jumps past any deadline on a loaded machine.
    own, management, seller, cheat = (Identity.generate() for _ in range(4))
    config = NodeConfig()
    config.trust.report_interval_s = 0.05
    counter = iter(range(10**9))
    trust = make(
        tmp_path / "crystals.db", own, management,
        clock=lambda: NOW_MS + 1000 * next(counter), config=config,
    )
    trust.record(seller.public_key, TrustEvent.DELIVERED_OK)
    for _ in range(3):
        trust.record(cheat.public_key, TrustEvent.DELIVERY_TAMPERED)
    published: list[TrustReport] = []
    banned: list[str] = []

    async def publish(report: TrustReport) -> None:
        # the report must be sealable, i.e. acceptable to every peer
        seal(own, "trust_report", report, len(published) + 1, NOW_MS)
        published.append(report)

    async with trio.open_nursery() as nursery:
        await nursery.start(trust.run, publish, banned.append)
        with trio.fail_after(30):
            while len(published) < 3:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert [entry.peer for entry in published[0].row] == [seller.public_key, cheat.public_key]
    assert published[0].row[0].weight_ppm == PPM
    assert banned == [cheat.peer_id]  # once, not every round
    assert published[0].epoch < published[1].epoch < published[2].epoch
    trust.ledger.db.close()


async def test_an_unchanged_row_waits_for_the_refresh_and_a_changed_one_goes_out(
    tmp_path: Path,
) -> None:
    own, management, seller, other = (Identity.generate() for _ in range(4))
    config = NodeConfig()
    config.trust.report_startup_reports = 1
    clock = HandClock(NOW_MS)
    trust = make(tmp_path / "crystals.db", own, management, clock=clock, config=config)
    trust.record(seller.public_key, TrustEvent.DELIVERED_OK)
    published: list[TrustReport] = []

    async def publish(report: TrustReport) -> None:
        published.append(report)

    assert await trust.tick(publish) is not None
    for _ in range(179):  # ticks every 10 s, the row unchanged, for just under 30 min
        clock.now += 10_000
        assert await trust.tick(publish) is None
    clock.now += 9_999
    assert await trust.tick(publish) is None
    clock.now += 1
    refreshed = await trust.tick(publish)  # report_refresh_s (1800 s) after the first
    assert refreshed is not None and refreshed.row == published[0].row
    trust.record(other.public_key, TrustEvent.DELIVERED_OK)  # the row changes by half
    clock.now += 10_000
    changed = await trust.tick(publish)
    assert changed is not None and len(changed.row) == 2
    assert len(published) == 3
    trust.ledger.db.close()


async def test_a_large_network_spaces_reports_out_and_receivers_keep_them_longer(
    tmp_path: Path,
) -> None:
    own, management, seller = (Identity.generate() for _ in range(3))
    clock = HandClock(NOW_MS)
    trust = make(tmp_path / "crystals.db", own, management, clock=clock, network_size=10_000)
    published: list[TrustReport] = []

    async def publish(report: TrustReport) -> None:
        published.append(report)

    assert trust.report_intervals_s() == (10_000.0, 10_000.0)  # 10,000 nodes / 1 report/s
    assert await trust.tick(publish) is not None
    assert trust.matrix.max_age_ms == 30_000_000  # three refreshes
    # even a changed row (and a node still starting up) waits for the interval
    trust.record(seller.public_key, TrustEvent.DELIVERED_OK)
    clock.now += 9_999_999
    assert await trust.tick(publish) is None
    clock.now += 1
    assert await trust.tick(publish) is not None
    assert len(published) == 2
    trust.ledger.db.close()


async def test_a_small_network_keeps_the_floor(tmp_path: Path) -> None:
    own, management = Identity.generate(), Identity.generate()
    trust = make(tmp_path / "crystals.db", own, management, network_size=3)
    assert trust.report_intervals_s() == (10.0, 1800.0)
    trust.ledger.db.close()


async def test_a_restart_keeps_the_cadence(tmp_path: Path) -> None:
    # Churn must not add reports: a node that comes back waits out the interval of its last one.
    own, management = Identity.generate(), Identity.generate()
    clock = HandClock(NOW_MS)
    published: list[TrustReport] = []

    async def publish(report: TrustReport) -> None:
        published.append(report)

    first = make(tmp_path / "crystals.db", own, management, clock=clock, network_size=10_000)
    assert await first.tick(publish) is not None
    first.ledger.db.close()
    clock.now += 9_999_000
    again = make(tmp_path / "crystals.db", own, management, clock=clock, network_size=10_000)
    assert again.last_published == published[0]
    assert await again.tick(publish) is None
    clock.now += 1_000
    assert await again.tick(publish) is not None
    assert len(published) == 2
    again.ledger.db.close()
