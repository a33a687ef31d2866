"""Churn with real processes: a node killed with SIGKILL and restarted on a new port is
connected again to every peer it had, within 30 s, and a node restarted with an empty
bootstrap list reconnects from the peers it saved (``<data dir>/peers.json``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from node.chain.localchain import free_port
from node.net import saved_peers
from tests.support.devnet import Devnet
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODES = 3
REFOUND_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("churn") / "devnet", NODES, with_chain=False) as net:
        yield net


def peer_id(devnet: Devnet, name: str) -> str:
    return str(devnet.api(name).get("/v1/status")["peer_id"])


def connected(devnet: Devnet, name: str) -> set[str]:
    return {p["peer_id"] for p in devnet.api(name).get("/v1/peers")["peers"] if p["connected"]}


def saved(devnet: Devnet, name: str) -> set[str]:
    own = peer_id(devnet, name)
    return {p.peer_id for p in saved_peers.read(devnet.data_dir(name) / "peers.json", "devnet", own)}


def restart_on_new_port(devnet: Devnet, name: str, bootstrap: str | None = None) -> float:
    """SIGKILL ``name``, start it on a new port; seconds from the restart to its API answering."""
    devnet.kill_node(name)
    env = {"CRYSTALMESH_NET_LISTEN": f"/ip4/127.0.0.1/tcp/{free_port()}"}
    if bootstrap is not None:
        env["CRYSTALMESH_NET_BOOTSTRAP"] = bootstrap
    started = time.monotonic()
    devnet.restart_node(name, env=env)
    return started


def test_a_killed_node_restarted_on_a_new_port_is_reconnected_to_every_peer(
        devnet: Devnet) -> None:
    moving = "node-2"
    others = [name for name in devnet.names if name != moving]
    moving_id = peer_id(devnet, moving)
    other_ids = {peer_id(devnet, name) for name in others}
    wait_until(lambda: other_ids <= connected(devnet, moving), 60, "a connected devnet")
    wait_until(lambda: other_ids <= saved(devnet, moving), 60, "peers saved")
    old_addrs = devnet.api(moving).get("/v1/status")["listen_addrs"]

    started = restart_on_new_port(devnet, moving)
    assert devnet.api(moving).get("/v1/status")["listen_addrs"] != old_addrs
    wait_until(lambda: all(moving_id in connected(devnet, name) for name in others),
             REFOUND_WITHIN_S, "every peer connected to the restarted node again")
    print(f"re-found by every peer {time.monotonic() - started:.1f} s after the restart")


def test_a_node_restarted_with_no_bootstrap_reconnects_from_its_saved_peers(
        devnet: Devnet) -> None:
    moving = "node-3"
    others = [name for name in devnet.names if name != moving]
    moving_id = peer_id(devnet, moving)
    other_ids = {peer_id(devnet, name) for name in others}
    wait_until(lambda: other_ids <= saved(devnet, moving), 60, "peers saved")

    started = restart_on_new_port(devnet, moving, bootstrap="")
    wait_until(lambda: other_ids <= connected(devnet, moving), REFOUND_WITHIN_S,
             "reconnected to its saved peers")
    assert all(moving_id in connected(devnet, name) for name in others)
    print(f"reconnected from saved peers {time.monotonic() - started:.1f} s after the restart")
