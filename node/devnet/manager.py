"""``crystalmesh devnet up|down|status``: a local network of node processes + a chain.

Layout under the devnet dir::

    devnet.json          state file (pids, ports, peer ids, chain addresses)
    chain/anvil.log      the local EVM (chain id 84532)
    management/          the management node's data dir (its key is every node's management key)
    node-1/ … node-N/    edge nodes' data dirs, each with node.log
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node.api import ApiClient, ApiError, pid_alive, running_node
from node.chain import (
    deploy_devnet,
    free_port,
    fund,
    rpc_url_for,
    spawn_anvil,
    stop_process,
    wait_for_rpc,
)
from node.config import BASE_SEPOLIA_CHAIN_ID, load_config
from node.crystals import now_ms
from node.devnet.state import (
    ChainEntry,
    DevnetError,
    DevnetState,
    NodeEntry,
    default_devnet_dir,
    load_state,
    save_state,
)
from node.init import init_node

MANAGEMENT = "management"
NODE_USDC_MICRO = 100_000_000  # 100 test USDC per node wallet
NODE_ETH_WEI = 10 * 10**18  # gas for settling purchases as a seller

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def is_running(state: DevnetState) -> bool:
    return any(pid_alive(entry.pid) for entry in state.nodes) or bool(
        state.chain and pid_alive(state.chain.pid)
    )


def up(
    count: int,
    directory: Path | None = None,
    *,
    embedder: str = "minilm",
    with_chain: bool = True,
    progress: Progress = _quiet,
    timeout_s: float = 90.0,
) -> DevnetState:
    if count < 1:
        raise DevnetError("a devnet needs at least one node (-n 1)")
    root = Path(directory).expanduser().resolve() if directory else default_devnet_dir()
    try:
        previous = load_state(root)
    except DevnetError:
        previous = None
    if previous is not None and is_running(previous):
        raise DevnetError(
            f"a devnet is already running in {root}; stop it with `crystalmesh devnet down --dir {root}`"
        )
    if previous is not None:
        # A devnet is a fresh network each time: the chain restarts empty, so old
        # node data (balances, settlements, listings priced on it) would be stale.
        progress(f"replacing the stopped devnet in {root}")
        for entry in previous.nodes:
            shutil.rmtree(entry.data_dir, ignore_errors=True)
        shutil.rmtree(root / "chain", ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    state = DevnetState(dir=str(root), created_at_ms=now_ms())
    chain_settings: dict[str, Any] = {}
    try:
        if with_chain:
            progress("starting chain (anvil, chain id 84532)")
            port = free_port()
            log_path = root / "chain" / "anvil.log"
            pid = spawn_anvil(port, log_path, state_path=root / "chain" / "state.json")
            rpc_url = rpc_url_for(port)
            state.chain = ChainEntry(pid, rpc_url, BASE_SEPOLIA_CHAIN_ID, "", "", str(log_path))
            save_state(state)
            wait_for_rpc(rpc_url, 15.0, expected_chain_id=BASE_SEPOLIA_CHAIN_ID)
            deployed = deploy_devnet(rpc_url)
            state.chain.token_address = deployed.token_address
            state.chain.settler_address = deployed.settler_address
            chain_settings = {
                "rpc_url": rpc_url,
                "chain_id": deployed.chain_id,
                "token_address": deployed.token_address,
                "settler_address": deployed.settler_address,
            }
            progress(f"chain ready at {rpc_url}: USDC {deployed.token_address}")

        names = [MANAGEMENT] + [f"node-{i}" for i in range(1, count + 1)]
        ports = {name: (free_port(), free_port()) for name in names}
        listen = {name: f"/ip4/127.0.0.1/tcp/{ports[name][0]}" for name in names}
        summaries: dict[str, dict[str, Any]] = {}
        management = init_node(root / MANAGEMENT, name=MANAGEMENT, embedder=embedder)
        management_key = management["public_key"]
        for index, name in enumerate(names):
            earlier = names[:index]
            bootstrap = [f"{listen[other]}/p2p/{summaries[other]['peer_id']}" for other in earlier]
            summaries[name] = init_node(
                root / name,
                name=name,
                embedder=embedder,
                listen=listen[name],
                api_port=ports[name][1],
                bootstrap=bootstrap,
                management_keys=[management_key],
                chain=chain_settings,
            )
        if with_chain:
            progress(f"funding {len(names)} wallets with 100 test USDC and 10 ETH each")
            fund(
                chain_settings["rpc_url"],
                [summaries[name]["wallet_address"] for name in names],
                usdc_micro=NODE_USDC_MICRO,
                eth_wei=NODE_ETH_WEI,
            )

        for name in names:
            data_dir = root / name
            pid = _spawn_node(data_dir)
            summary = summaries[name]
            state.nodes.append(
                NodeEntry(
                    name=name,
                    data_dir=str(data_dir),
                    pid=pid,
                    peer_id=summary["peer_id"],
                    public_key=summary["public_key"],
                    api_port=ports[name][1],
                    listen=f"{listen[name]}/p2p/{summary['peer_id']}",
                    wallet_address=summary["wallet_address"],
                    management=name == MANAGEMENT,
                )
            )
            save_state(state)
        progress(f"started {len(names)} node processes; waiting for them to connect")
        _wait_ready(state, timeout_s, progress)
    except BaseException:
        down(root)
        raise
    return state


def _spawn_node(data_dir: Path) -> int:
    """Start ``crystalmesh run`` for ``data_dir`` detached (own session, output to node.log)."""
    for stale in ("node.pid", "api.port"):
        (data_dir / stale).unlink(missing_ok=True)
    with open(data_dir / "node.log", "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "run"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process.pid


def restart(name: str, directory: Path | None = None, *, progress: Progress = _quiet,
            timeout_s: float = 90.0) -> dict[str, Any]:
    """Restart one node (``node-1``, ``management``) or the chain (``chain``) of a devnet.

    A node keeps its data dir; the chain keeps its state (anvil runs with ``--state``
    under ``<devnet dir>/chain/``), so balances, contracts and settlements survive.
    Whatever still runs under that name is stopped first, so this also recovers a
    process that was killed.
    """
    state = load_state(directory)
    root = Path(state.dir)
    if name == "chain":
        chain = state.chain
        if chain is None:
            raise DevnetError("this devnet runs without a chain")
        if pid_alive(chain.pid) and _cmdline_has(chain.pid, "anvil"):
            stop_process(chain.pid)
        port = int(chain.rpc_url.rsplit(":", 1)[1])
        chain.pid = spawn_anvil(port, Path(chain.log), chain_id=chain.chain_id,
                                state_path=root / "chain" / "state.json")
        save_state(state)
        wait_for_rpc(chain.rpc_url, 15.0, expected_chain_id=chain.chain_id)
        progress(f"chain back at {chain.rpc_url} (pid {chain.pid})")
        return {"restarted": "chain", "pid": chain.pid, "rpc_url": chain.rpc_url}
    entry = next((node for node in state.nodes if node.name == name), None)
    if entry is None:
        known = ", ".join(["chain", *(node.name for node in state.nodes)])
        raise DevnetError(f"no {name!r} in this devnet; one of: {known}")
    if pid_alive(entry.pid) and _is_our_node(entry.pid, entry.data_dir):
        stop_process(entry.pid, timeout_s=10.0)
    entry.pid = _spawn_node(Path(entry.data_dir))
    save_state(state)
    _wait_ready(dataclasses.replace(state, nodes=[entry]), timeout_s, progress)
    return {"restarted": name, "pid": entry.pid}


def _wait_ready(state: DevnetState, timeout_s: float, progress: Progress) -> None:
    deadline = time.monotonic() + timeout_s
    pending = {entry.name for entry in state.nodes}
    want_peers = 1 if len(state.nodes) > 1 or len(load_state(Path(state.dir)).nodes) > 1 else 0
    while pending:
        for entry in state.nodes:
            if entry.name not in pending:
                continue
            if not pid_alive(entry.pid):
                tail = _tail(Path(entry.data_dir) / "node.log", 15)
                raise DevnetError(f"node {entry.name} exited during start-up; its log ends:\n{tail}")
            client = running_node(load_config(Path(entry.data_dir)), timeout_s=2.0)
            if client is None:
                continue
            try:
                status = client.status()
            except ApiError:
                continue
            finally:
                client.close()
            if status["connected_peers"] >= want_peers:
                pending.discard(entry.name)
                progress(f"  {entry.name} up: {status['connected_peers']} peers")
        if pending and time.monotonic() > deadline:
            raise DevnetError(f"nodes not ready after {timeout_s:.0f}s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.2)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def down(directory: Path | None = None) -> dict[str, Any]:
    """Stop exactly the processes this devnet started (by pid), nodes first, then the chain."""
    state = load_state(directory)
    stopped: list[str] = []
    for entry in state.nodes:
        if pid_alive(entry.pid) and _is_our_node(entry.pid, entry.data_dir):
            stop_process(entry.pid, timeout_s=10.0)
            stopped.append(entry.name)
    if state.chain and pid_alive(state.chain.pid) and _cmdline_has(state.chain.pid, "anvil"):
        stop_process(state.chain.pid)
        stopped.append("chain")
    return {"dir": state.dir, "stopped": stopped}


def _cmdline_has(pid: int, needle: str) -> bool:
    """Guard against pid reuse: only signal a process that still looks like ours."""
    try:
        return needle in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _is_our_node(pid: int, data_dir: str) -> bool:
    return _cmdline_has(pid, data_dir)


def status(directory: Path | None = None) -> dict[str, Any]:
    state = load_state(directory)
    nodes: list[dict[str, Any]] = []
    for entry in state.nodes:
        row: dict[str, Any] = {
            "name": entry.name,
            "peer_id": entry.peer_id,
            "api": f"http://127.0.0.1:{entry.api_port}",
            "dashboard": f"http://127.0.0.1:{entry.api_port}/dashboard",
            "pid": entry.pid,
            "running": pid_alive(entry.pid),
            "management": entry.management,
            "wallet_address": entry.wallet_address,
            "connected_peers": None,
            "listings_known": None,
            "weather": None,
            "x402_url": None,
        }
        if row["running"]:
            client = running_node(load_config(Path(entry.data_dir)), timeout_s=5.0)
            if client is not None:
                try:
                    info = client.status()
                    row.update(
                        connected_peers=info["connected_peers"],
                        listings_known=info["listings_known"],
                        weather=info["weather"],
                        x402_url=info.get("x402_url"),
                    )
                except ApiError:
                    pass
                finally:
                    client.close()
        nodes.append(row)
    chain: dict[str, Any] | None = None
    if state.chain:
        chain = {
            "rpc_url": state.chain.rpc_url,
            "chain_id": state.chain.chain_id,
            "token_address": state.chain.token_address,
            "settler_address": state.chain.settler_address,
            "running": pid_alive(state.chain.pid),
        }
        if chain["running"]:
            _add_balances(chain, nodes)
    return {"dir": state.dir, "chain": chain, "nodes": nodes}


def _add_balances(chain: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
    from node.chain import balances

    try:
        for row in nodes:
            found = balances(chain["rpc_url"], chain["token_address"], row["wallet_address"])
            row["usdc_micro"] = found["usdc_micro"]
            row["eth_wei"] = found["eth_wei"]
    except Exception as exc:  # a status view must not fail because the chain hiccups
        chain["error"] = str(exc)


def client_for(entry: NodeEntry) -> ApiClient:
    client = running_node(load_config(Path(entry.data_dir)))
    if client is None:
        raise DevnetError(f"devnet node {entry.name} is not running")
    return client
