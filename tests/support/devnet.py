"""A real devnet for end-to-end tests: anvil + node processes started by
``node.devnet.manager`` exactly as ``crystalmesh devnet up`` does, and the
market steps the e2e tests share (publish a skill, wait for its listing, read
a USDC balance)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from node.api.client import ApiClient, ApiError, running_node
from node.config import load_config
from node.devnet import manager
from node.devnet.state import DevnetState, load_state
from tests.support.wait import wait_until

REPO = Path(__file__).resolve().parents[2]


class Devnet:
    def __init__(self, directory: Path, count: int, with_chain: bool = True) -> None:
        self.dir = directory
        self.count = count
        self.with_chain = with_chain
        self.state: DevnetState | None = None
        self._clients: dict[str, ApiClient] = {}

    def __enter__(self) -> Devnet:
        self.state = manager.up(self.count, self.dir, with_chain=self.with_chain, timeout_s=120)
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self._clients.values():
            client.close()
        manager.down(self.dir)

    @property
    def names(self) -> list[str]:
        assert self.state is not None
        return [entry.name for entry in self.state.nodes]

    def api(self, name: str) -> ApiClient:
        if name not in self._clients:
            client = running_node(load_config(self.data_dir(name)), timeout_s=60.0)
            assert client is not None, f"{name} is not running"
            self._clients[name] = client
        return self._clients[name]

    def data_dir(self, name: str) -> Path:
        assert self.state is not None
        return Path(self.state.node(name).data_dir)

    def cli(self, *args: str, node: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the real ``crystalmesh`` command (as a user would) against this devnet."""
        command = [sys.executable, "-m", "node.cli.main", "--dir", str(self.dir)]
        if node:
            command += ["--node", node]
        result = subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=120,
            env=os.environ | {"PYTHONPATH": str(REPO)}, cwd=REPO,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"crystalmesh {' '.join(args)} failed: {result.stderr}")
        return result

    def cli_json(self, *args: str, node: str | None = None) -> Any:
        return json.loads(self.cli(*args, "--json", node=node).stdout)

    def stop_node(self, name: str) -> None:
        from node.chain.localchain import stop_process

        assert self.state is not None
        stop_process(self.state.node(name).pid, timeout_s=10)
        self._clients.pop(name, None)

    def kill_node(self, name: str) -> None:
        import signal

        assert self.state is not None
        os.kill(self.state.node(name).pid, signal.SIGKILL)
        self._clients.pop(name, None)

    def restart_node(self, name: str, env: dict[str, str] | None = None,
                     fault: str | None = None) -> None:
        """Start a stopped node again with the same data dir (as `crystalmesh run`).

        ``fault`` starts it through ``tests.support.fault_node`` with that fault injected."""
        data_dir = self.data_dir(name)
        for stale in ("node.pid", "api.port"):
            (data_dir / stale).unlink(missing_ok=True)
        log = open(data_dir / "node.log", "ab")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m",
             *(("tests.support.fault_node", fault, "--") if fault else ("node.cli.main",)),
             "--data-dir", str(data_dir), "run"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)} | (env or {}),
        )
        log.close()
        assert self.state is not None
        self.state.node(name).pid = process.pid
        from node.devnet.state import save_state

        save_state(self.state)
        wait_until(lambda: _answers(self, name), 60, f"{name} back up")
        self.state = load_state(self.dir)


def _answers(devnet: Devnet, name: str) -> bool:
    client = running_node(load_config(devnet.data_dir(name)), timeout_s=2.0)
    if client is None:
        return False
    try:
        return int(client.get("/v1/status")["connected_peers"]) >= 1
    except ApiError:
        return False
    finally:
        client.close()


def usdc(devnet: Devnet, name: str) -> int:
    """``name``'s USDC balance in micro-USDC, read through the CLI."""
    return int(devnet.cli_json("wallet", "balance", node=name)["usdc_micro"])


def publish(devnet: Devnet, seller: str, text: str, executions: int = 3) -> dict[str, Any]:
    """Add ``text`` as a public skill on ``seller``, record successful runs, publish it."""
    crystal = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public",
                              "--category", "ci", "--tag", "flaky", "--tag", "ci", text, node=seller)
    for _ in range(executions):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.9",
                   node=seller)
    listing = devnet.cli_json("skill", "publish", crystal["id"], node=seller)
    listing["crystal_id"] = crystal["id"]
    return listing


def known_everywhere(devnet: Devnet, listing_id: str,
                     names: tuple[str, ...] = ("node-2", "node-3")) -> None:
    """Wait until every node in ``names`` (default: the buyers of a 3-node devnet) lists it."""
    wait_until(lambda: all(listing_id in {item["listing_id"] for item in
                                          devnet.api(name).get("/v1/listings")["listings"]}
                           for name in names), 60, "listing gossiped")
