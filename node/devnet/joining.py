"""``crystalmesh devnet add NAME``: one more node on a running devnet.

The new node is set up like the ones ``devnet up`` started: same embedder and
chain settings, the management node's key as management key, every running
node as bootstrap peer, its wallet funded (100 test USDC, 10 ETH). It starts
with an empty listing book and catches up through the listings sync protocol.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from node.api import pid_alive
from node.chain import free_port, fund
from node.config import load_config
from node.devnet import manager
from node.devnet.state import DevnetError, NodeEntry, load_state, save_state
from node.init import init_node

NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


def add(name: str, directory: Path | None = None, *, progress: manager.Progress = manager._quiet,
        timeout_s: float = 90.0) -> dict[str, Any]:
    if not NAME.fullmatch(name) or name == "chain":
        raise DevnetError(f"{name!r} is not a node name: lower-case letters, digits and '-', "
                          "at most 32, starting with a letter, not 'chain'")
    state = load_state(directory)
    if not manager.is_running(state):
        raise DevnetError("no devnet is running here; start one with `crystalmesh devnet up`")
    if any(entry.name == name for entry in state.nodes):
        raise DevnetError(f"the devnet already has a node called {name!r}")
    root = Path(state.dir)
    if (root / name).exists():
        raise DevnetError(f"{root / name} exists already; pick another name")
    management = next((entry for entry in state.nodes if entry.management), None)
    if management is None:
        raise DevnetError("this devnet has no management node")
    embedder = load_config(Path(management.data_dir), environ={}).memory.embedder
    chain: dict[str, Any] = {}
    if state.chain is not None:
        chain = {"rpc_url": state.chain.rpc_url, "chain_id": state.chain.chain_id,
                 "token_address": state.chain.token_address,
                 "settler_address": state.chain.settler_address}
    listen = f"/ip4/127.0.0.1/tcp/{free_port()}"
    api_port = free_port()
    bootstrap = [entry.listen for entry in state.nodes if pid_alive(entry.pid)]
    summary = init_node(root / name, name=name, embedder=embedder, listen=listen,
                        api_port=api_port, bootstrap=bootstrap,
                        management_keys=[management.public_key], chain=chain)
    if chain:
        progress(f"funding {name} with 100 test USDC and 10 ETH")
        fund(chain["rpc_url"], [summary["wallet_address"]], usdc_micro=manager.NODE_USDC_MICRO,
             eth_wei=manager.NODE_ETH_WEI)
    pid = manager._spawn_node(root / name)
    entry = NodeEntry(name=name, data_dir=str(root / name), pid=pid, peer_id=summary["peer_id"],
                      public_key=summary["public_key"], api_port=api_port,
                      listen=f"{listen}/p2p/{summary['peer_id']}",
                      wallet_address=summary["wallet_address"])
    state.nodes.append(entry)
    save_state(state)
    progress(f"started {name} (pid {pid}); waiting for it to connect")
    manager._wait_ready(dataclasses.replace(state, nodes=[entry]), timeout_s, progress)
    return dataclasses.asdict(entry) | {"bootstrap": bootstrap}
