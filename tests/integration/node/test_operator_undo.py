"""The operator's undo on real nodes (NodeService, libp2p on 127.0.0.1, real SQLite):
a weather lift ends an alert on every node, a forged or replayed lift changes nothing,
a peer is banned and unbanned by hand (only with the API token), and every act lands in
the audit log, shown by `crystalmesh audit`.

The attacker is a bare NetService whose validators are removed (it relays anything),
connected to the honest nodes like any peer; it captured a genuine lift off the wire.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trio

from node.config import load_config
from node.init import init_node
from node.keys import load_identity
from node.net.rules.scoring import ScoringConfig
from node.net.service import NetService
from node.service import NodeService
from protocol.envelope import Envelope, seal
from protocol.messages import WeatherLift
from protocol.topics import GOSSIP_TOPICS, WEATHER
from tests.support.cli import Cli
from tests.support.net import Inbox, make_net
from tests.support.wait import wait_until_async

WAIT_S = 60.0
NO_BANS = ScoringConfig(ban_threshold=-1e9)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def honest_node(tmp_path: Path, name: str, management_key: bytes | None = None) -> NodeService:
    """A node whose [net] management_keys holds ``management_key`` (default: its own key)."""
    init_node(tmp_path / name, name=name, embedder="hashing")
    key = management_key or load_identity(load_config(tmp_path / name, environ={})).public_key
    return NodeService(load_config(tmp_path / name, environ={},
                                   overrides={"net": {"management_keys": [key.hex()]}}))


@dataclass
class Mesh:
    management: NodeService
    follower: NodeService
    attacker: NetService
    captured: Inbox
    nursery: trio.Nursery
    tmp_path: Path

    async def join(self, name: str) -> NodeService:
        """Another honest node, connected to the management node and to the attacker."""
        node = honest_node(self.tmp_path, name, self.management.identity.public_key)
        await self.nursery.start(node.run)
        node.net.connect(self.management.net.listen_addrs()[0])
        node.net.connect(self.attacker.listen_addrs()[0])
        await wait_until_async(
            lambda: {self.management.identity.peer_id, self.attacker.peer_id}
            <= set(node.net.mesh_peers(WEATHER)), WAIT_S, f"{name} in the weather mesh")
        return node


@pytest.fixture
async def mesh(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Mesh]:
    management = honest_node(tmp_path, "management")
    await nursery.start(management.run)
    attacker = make_net(bootstrap=[management.net.listen_addrs()[0]],
                        management_keys=[management.identity.public_key], scoring=NO_BANS)
    for topic in GOSSIP_TOPICS:
        attacker.pubsub.remove_topic_validator(topic)
    captured = Inbox()
    captured.attach(attacker)
    await nursery.start(attacker.run)
    await wait_until_async(lambda: attacker.peer_id in management.net.mesh_peers(WEATHER), WAIT_S,
                           "attacker in the management node's weather mesh")
    mesh = Mesh(management, management, attacker, captured, nursery, tmp_path)
    mesh.follower = await mesh.join("follower")
    yield mesh


def http(node: NodeService, token: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {token or node.api_token}"}
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=WAIT_S,
                             headers=headers)


def active(node: NodeService) -> bool:
    return bool(node.weather.status()["active"])


async def test_a_lift_ends_the_alert_everywhere_and_forged_or_replayed_lifts_do_not(
        mesh: Mesh, capsys: pytest.CaptureFixture[str]) -> None:
    management, follower, attacker = mesh.management, mesh.follower, mesh.attacker
    async with http(management) as api:
        alert = await api.post("/v1/weather/broadcast", json={"level": 0.9, "duration_s": 600,
                                                               "reason": "first alarm"})
        assert alert.status_code == 200, alert.text
        await wait_until_async(lambda: active(follower), WAIT_S, "the alert on the follower")
        # A node that is not a management node cannot lift: refused, nothing gossiped.
        async with http(follower) as other:
            refused = await other.post("/v1/weather/lift", json={"reason": "not mine"})
        assert refused.status_code == 403 and active(follower)

        lift = await api.post("/v1/weather/lift", json={"reason": "false alarm"})
        assert lift.status_code == 200, lift.text
        assert lift.json()["was_active"] is True and lift.json()["weather"]["active"] is False
        await wait_until_async(lambda: not active(follower), WAIT_S, "the lift on the follower")
        await wait_until_async(lambda: any(e.kind == WeatherLift.KIND for e in mesh.captured.weather),
                               WAIT_S, "the attacker to capture the lift")
        captured: Envelope = next(e for e in mesh.captured.weather if e.kind == WeatherLift.KIND)
        assert captured.seq == lift.json()["seq"]

        # A second alert; a node that joins now has seen it but never the captured lift.
        second = await api.post("/v1/weather/broadcast", json={"level": 0.7, "duration_s": 600,
                                                                "reason": "real storm"})
        assert second.status_code == 200
        await wait_until_async(lambda: active(follower), WAIT_S, "the second alert on the follower")
    # Gossipsub would still hand a newcomer the lift it holds for IWANT: join once it left
    # every message cache, so only the attacker can bring it.
    def lift_forgotten() -> bool:
        return not any(message.data == captured.to_bytes()
                       for net in (management.net, follower.net, attacker)
                       for message in net.router.mcache.msgs.values())

    await wait_until_async(lift_forgotten, WAIT_S, "the lift to leave every gossip cache")
    late = await mesh.join("late")
    async with http(management) as api:
        third = await api.post("/v1/weather/broadcast", json={"level": 0.6, "duration_s": 600,
                                                               "reason": "still stormy"})
        assert third.status_code == 200
    await wait_until_async(lambda: active(late), WAIT_S, "the third alert on the late node")

    # Forged: a lift signed by the attacker's own key.
    forged = seal(attacker.identity, WeatherLift.KIND, WeatherLift(now_ms(), "all clear"),
                  attacker.sequence.next(), now_ms())
    await attacker.pubsub.publish(WEATHER, forged)
    await wait_until_async(lambda: late.net.rejection_counts(attacker.peer_id).get("not_management") == 1,
                           WAIT_S, "the forged lift rejected and charged to the attacker")
    # Replayed: the management node's genuine lift, captured earlier, sent again by a peer
    # that never relayed it (the attacker's own gossip would drop what it has seen). It is
    # older than the alert the late node holds: below that key's seq high-water mark.
    replayer = make_net(bootstrap=[late.net.listen_addrs()[0]], scoring=NO_BANS)
    for topic in GOSSIP_TOPICS:
        replayer.pubsub.remove_topic_validator(topic)
    await mesh.nursery.start(replayer.run)
    await wait_until_async(lambda: late.identity.peer_id in replayer.mesh_peers(WEATHER), WAIT_S,
                           "the replayer in the late node's weather mesh")
    await replayer.pubsub.publish(WEATHER, captured.to_bytes())
    await wait_until_async(lambda: late.net.gossip.ignored.get("replayed", 0) >= 1, WAIT_S,
                           "the replayed lift ignored")
    assert active(late) and active(follower) and active(management)
    assert late.weather.status()["reason"] in {"real storm", "still stormy"}

    # The genuine lift still works, and the log says who undid what.
    cli = Cli(capsys, management.config.data_dir)
    lifted = await trio.to_thread.run_sync(cli.json, "weather", "lift", "--reason", "storm over")
    assert lifted["weather"]["active"] is False
    await wait_until_async(lambda: not active(late) and not active(follower), WAIT_S,
                           "the second lift everywhere")
    entries = await trio.to_thread.run_sync(cli.json, "audit")
    assert [(e["action"], e["detail"]["reason"]) for e in entries] == [
        ("weather_lift", "false alarm"), ("weather_lift", "storm over")]
    code, out, _ = await trio.to_thread.run_sync(cli.run, "audit")
    assert code == 0 and "weather_lift" in out


async def test_ban_and_unban_by_hand_need_the_token_and_are_audited(
        mesh: Mesh, capsys: pytest.CaptureFixture[str]) -> None:
    follower, attacker = mesh.follower, mesh.attacker
    target = attacker.peer_id
    async with http(follower, token="not-the-token") as stranger:
        for path in ("/v1/trust/ban", "/v1/trust/unban"):
            response = await stranger.post(path, json={"peer": target})
            assert response.status_code == 401
        assert (await stranger.get("/v1/audit")).status_code == 401
    assert not follower.net.is_banned(target)
    assert follower.trust.level(attacker.identity.public_key).value != "banned"
    assert follower.operator.audit.tail() == []

    async with http(follower) as api:
        management_ban = await api.post("/v1/trust/ban", json={"peer": mesh.management.identity.public_key.hex()})
        assert management_ban.status_code == 400 and "management" in management_ban.text
        nonsense = await api.post("/v1/trust/ban", json={"peer": "not a peer"})
        assert nonsense.status_code == 400
        assert follower.operator.audit.tail() == []

        banned = await api.post("/v1/trust/ban", json={"peer": target, "reason": "sold a stealer"})
        assert banned.status_code == 200, banned.text
        assert banned.json()["level"] == "banned"
    assert follower.net.is_banned(target)
    await wait_until_async(lambda: target not in follower.net.connected_peers(), WAIT_S,
                           "the banned peer cut off")

    cli = Cli(capsys, follower.config.data_dir)
    unbanned = await trio.to_thread.run_sync(cli.json, "trust", "unban", attacker.identity.public_key.hex(),
                                             "--reason", "mistake")
    assert unbanned["peer_id"] == target and unbanned["level"] != "banned"
    assert not follower.net.is_banned(target)
    entries = await trio.to_thread.run_sync(cli.json, "audit")
    assert [(e["action"], e["target"], e["detail"]["reason"]) for e in entries] == [
        ("trust_ban", target, "sold a stealer"), ("trust_unban", target, "mistake")]


async def test_an_endorsement_revoked_from_the_cli_is_dropped_by_every_node(
        mesh: Mesh, capsys: pytest.CaptureFixture[str]) -> None:
    management, follower = mesh.management, mesh.follower
    crystal = await management.memory.add_from_request(
        {"text": "rotate the ingress TLS certificates with the ACME client", "type": "skill",
         "scope": "public", "category": "ops"})
    for _ in range(3):
        await management.market.record_execution(crystal.id, True, 1.0)
    listing = await management.market.publish_skill(crystal.id)
    listing_id = listing["listing_id"]

    async def endorsed_on_follower() -> str | None:
        stored = await follower.memory.run(follower.listings.get, listing_id)
        return None if stored is None else stored.endorsed_by

    await wait_until_async(lambda: follower.memory.run(follower.listings.get, listing_id), WAIT_S,
                           "the listing on the follower")
    await management.market.endorse_listing(listing_id)
    key = management.identity.public_key.hex()
    await wait_until_async(lambda: _equals(endorsed_on_follower, key), WAIT_S, "the endorsement")

    follower_cli = Cli(capsys, follower.config.data_dir)
    line = await trio.to_thread.run_sync(follower_cli.fails, "skill", "endorse", listing_id, "--revoke")
    assert "management" in line

    cli = Cli(capsys, management.config.data_dir)
    revoked = await trio.to_thread.run_sync(cli.json, "skill", "endorse", listing_id, "--revoke",
                                            "--reason", "the seller changed hands")
    assert revoked["revoked_by"] == key and revoked["audit"]["action"] == "endorsement_revoke"
    await wait_until_async(lambda: _equals(endorsed_on_follower, None), WAIT_S,
                           "the revocation on the follower")
    entries = await trio.to_thread.run_sync(cli.json, "audit")
    assert [(e["action"], e["target"], e["detail"]["reason"]) for e in entries] == [
        ("endorsement_revoke", listing_id, "the seller changed hands")]


async def _equals(read: Callable[[], Awaitable[object]], expected: object) -> bool:
    return await read() == expected
