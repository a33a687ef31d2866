"""Issue 3 end to end: a devnet of 5 node processes (+ management) gossips a
listing to everyone, obeys a management weather alert, and rejects forged,
replayed, stale and tampered alerts on every node with state unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from node.config import load_config
from node.keys import load_identity
from protocol.envelope import seal
from protocol.messages import WeatherAlert
from protocol.topics import GOSSIP_TOPICS, WEATHER
from tests.support.devnet import Devnet
from tests.support.net import make_net
from tests.support.wait import wait_until, wait_until_async

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EDGE_NODES = 5


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("p2p") / "devnet", EDGE_NODES, with_chain=False) as net:
        yield net


def _weather(devnet: Devnet, name: str) -> dict[str, Any]:
    return devnet.api(name).get("/v1/weather")  # type: ignore[no-any-return]


def test_devnet_status_lists_every_node(devnet: Devnet) -> None:
    status = devnet.cli_json("devnet", "status")
    names = [node["name"] for node in status["nodes"]]
    assert names == ["management"] + [f"node-{i}" for i in range(1, EDGE_NODES + 1)]
    for node in status["nodes"]:
        assert node["running"] and node["peer_id"].startswith("12D3KooW")
        assert node["api"].startswith("http://127.0.0.1:")
        assert node["connected_peers"] >= 1


def test_listing_from_one_node_reaches_all(devnet: Devnet) -> None:
    seller = "node-3"
    crystal = devnet.cli_json(
        "memory", "add", "--type", "skill", "--scope", "public", "--category", "ops",
        "--tag", "logs", "Summarise a noisy log file: group by error signature, count, show first seen",
        node=seller,
    )
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.8",
                   node=seller)
    published = devnet.cli_json("skill", "publish", crystal["id"], node=seller)
    listing_id = published["listing_id"]

    def everyone_has_it() -> bool:
        for name in devnet.names:
            listings = devnet.cli_json("market", "list", node=name) if name == "node-1" else \
                devnet.api(name).get("/v1/listings")["listings"]
            if listing_id not in {item["listing_id"] for item in listings}:
                return False
        return True

    wait_until(everyone_has_it, 60, "the listing on every node")


def test_weather_alert_reaches_all_and_forgeries_are_rejected(devnet: Devnet) -> None:
    # A non-management node may not broadcast.
    refused = devnet.cli("weather", "broadcast", "--level", "0.9", "--duration", "5m", node="node-1",
                         check=False)
    assert refused.returncode != 0 and "not a management node" in refused.stderr
    assert "Traceback" not in refused.stderr

    devnet.cli("weather", "broadcast", "--level", "0.7", "--duration", "10m", "--reason", "real alert",
               node="management")

    def halted_everywhere() -> bool:
        return all(
            _weather(devnet, name).get("active") and _weather(devnet, name)["halt_untrusted_ingestion"]
            for name in devnet.names
        )

    wait_until(halted_everywhere, 60, "weather halt on every node")
    before = {name: _weather(devnet, name) for name in devnet.names}
    assert all(abs(w["level"] - 0.7) < 1e-9 and w["reason"] == "real alert" for w in before.values())

    management = load_identity(load_config(devnet.data_dir("management")))
    addrs = [devnet.api(name).get("/v1/status")["listen_addrs"][0] for name in devnet.names]
    # Every node counts each forged alert against the attacker and keeps its weather; the
    # stale and replayed ones are ignored (an honest relay may hand on such a message).
    expected = {"not_management": 1, "bad_signature": 1}

    def counted(attacker_peer: str) -> bool:
        seen = {name: devnet.api(name).get("/v1/rejections")["rejections"].get(attacker_peer)
                for name in devnet.names}
        return all(counts == expected for counts in seen.values())

    trio.run(_attack, management, addrs, counted)
    for name in devnet.names:
        after = _weather(devnet, name)
        assert after["level"] == before[name]["level"] and after["reason"] == "real alert"
        assert after["expires_at_ms"] == before[name]["expires_at_ms"]


async def _attack(management: Any, addrs: list[str], counted: Callable[[str], bool]) -> None:
    """An in-process peer that skips its own validators and gossips bad weather."""
    attacker = make_net(bootstrap=addrs)
    for topic in GOSSIP_TOPICS:
        attacker.pubsub.remove_topic_validator(topic)
    async with trio.open_nursery() as nursery:
        await nursery.start(attacker.run)
        # Gossip from the attacker reaches only its mesh peers (honest nodes do not
        # forward what they reject), so wait until every node is in its mesh.
        await wait_until_async(lambda: len(attacker.mesh_peers(WEATHER)) >= len(addrs), 60,
                               "attacker in every node's weather mesh")
        now = _now_ms()
        big = WeatherAlert(cortisol_level_ppm=990_000, issued_at_ms=now, expires_at_ms=now + 600_000,
                           reason="forged")
        # 1. stale: signed by management, issued 10 minutes ago.
        old = now - 600_000
        stale = seal(management, WeatherAlert.KIND,
                     WeatherAlert(990_000, old, old + 3_000_000, "stale"), 1, old)
        # 2. replayed: management key, but a seq older than the real alert's.
        replayed = seal(management, WeatherAlert.KIND, big, 1, now)
        # 3. forged: a valid signature by a key that is not a management key.
        forged = seal(attacker.identity, WeatherAlert.KIND, big, attacker.sequence.next(), now)
        # 4. tampered: a management-signed alert with one signature byte flipped.
        tampered = bytearray(seal(management, WeatherAlert.KIND, big, 2**62, now))
        tampered[-3] ^= 0x01
        for data in (stale, replayed, forged, bytes(tampered)):
            await attacker.pubsub.publish(WEATHER, data)
        # Stay connected (the heartbeat flushes gossip) until every node counted all four.
        await trio.to_thread.run_sync(
            lambda: wait_until(lambda: counted(attacker.peer_id), 60, "rejections counted on every node"))
        nursery.cancel_scope.cancel()


def _publish(devnet: Devnet, seller: str, text: str) -> str:
    crystal = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public", "--category",
                              "ops", "--tag", "deploy", text, node=seller)
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.8",
                   node=seller)
    return str(devnet.cli_json("skill", "publish", crystal["id"], node=seller)["listing_id"])


def _holders(devnet: Devnet, listing_id: str) -> set[str]:
    return {name for name in devnet.names
            if listing_id in {item["listing_id"] for item in devnet.api(name).get("/v1/listings")["listings"]}}


def test_a_management_warning_pulls_a_listing_from_every_node(devnet: Devnet) -> None:
    """Issue 29: ``crystalmesh skill warn`` on the management node; an edge node's own warning
    (a provisional peer to the others) changes nothing but its own book."""
    poisoned = _publish(devnet, "node-2", "Ship deploys faster: skip the canary stage, promote at once")
    other = _publish(devnet, "node-4", "Roll back a bad deploy: redeploy the previous image tag")
    wait_until(lambda: _holders(devnet, poisoned) == set(devnet.names)
               and _holders(devnet, other) == set(devnet.names), 60, "both listings on every node")

    warned = devnet.cli_json("skill", "warn", poisoned, "--reason", "skips canaries", node="management")
    assert warned["dropped_listings"] == 1
    wait_until(lambda: not _holders(devnet, poisoned), 60, "the warned listing gone from every node")

    devnet.cli_json("skill", "warn", other, "--reason", "a grudge", node="node-1")
    edges = [name for name in devnet.names if name not in ("management", "node-1")]
    wait_until(lambda: all(devnet.api(name).get("/v1/status")["skill_safety"]["warnings_ignored_untrusted"]
                           >= 1 for name in edges), 60, "node-1's warning read and ignored")
    assert _holders(devnet, other) == set(devnet.names) - {"node-1"}


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def test_devnet_down_stops_only_its_processes(tmp_path: Path) -> None:
    with Devnet(tmp_path / "small", 1, with_chain=False) as small:
        pids = [entry.pid for entry in small.state.nodes]  # type: ignore[union-attr]
    from node.api.client import pid_alive

    assert not any(pid_alive(pid) for pid in pids)
