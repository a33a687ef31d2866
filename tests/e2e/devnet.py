"""A real devnet for end-to-end tests: anvil + node processes started by
``node.devnet.manager`` exactly as ``crystalmesh devnet up`` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node.api.client import ApiClient, ApiError, running_node
from node.config import load_config
from node.devnet import manager
from node.devnet.state import DevnetState, load_state

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

        ``fault`` starts it through ``tests.e2e.fault_node`` with that fault injected."""
        data_dir = self.data_dir(name)
        for stale in ("node.pid", "api.port"):
            (data_dir / stale).unlink(missing_ok=True)
        log = open(data_dir / "node.log", "ab")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m",
             *(("tests.e2e.fault_node", fault, "--") if fault else ("node.cli.main",)),
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
        wait_for(lambda: _answers(self, name), 60, f"{name} back up")
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


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.1) -> Any:
    """Poll a condition (no sleeps as synchronisation): return its truthy value or fail.

    An exception from ``predicate`` (a node API resetting the connection under load)
    counts as "not yet"; the last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")
