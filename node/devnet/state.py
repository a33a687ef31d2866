"""The devnet state file: what ``devnet up`` started, so other commands can find it.

``<devnet dir>/devnet.json`` lists the chain and every node (name, data dir,
pid, peer id, ports). ``~/.crystalmesh/devnet-latest`` names the most recent
devnet dir, which ``--node NAME`` uses when no ``--dir`` is given.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from node.config import crystalmesh_home
from node.errors import CrystalmeshError

STATE_FILE = "devnet.json"


def default_devnet_dir() -> Path:
    return crystalmesh_home() / "devnet"


def latest_pointer() -> Path:
    return crystalmesh_home() / "devnet-latest"


class DevnetError(CrystalmeshError, RuntimeError):
    """A devnet command could not do what was asked; the message says why."""


@dataclass
class NodeEntry:
    name: str
    data_dir: str
    pid: int
    peer_id: str
    public_key: str
    api_port: int
    listen: str
    wallet_address: str
    management: bool = False


@dataclass
class ChainEntry:
    pid: int
    rpc_url: str
    chain_id: int
    token_address: str
    settler_address: str
    log: str


@dataclass
class DevnetState:
    dir: str
    created_at_ms: int
    chain: ChainEntry | None = None
    nodes: list[NodeEntry] = field(default_factory=list)

    def node(self, name: str) -> NodeEntry:
        for entry in self.nodes:
            if entry.name == name:
                return entry
        names = ", ".join(entry.name for entry in self.nodes)
        raise DevnetError(f"no devnet node named {name!r} (nodes: {names})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevnetState:
        return cls(
            dir=data["dir"],
            created_at_ms=data["created_at_ms"],
            chain=ChainEntry(**data["chain"]) if data.get("chain") else None,
            nodes=[NodeEntry(**entry) for entry in data.get("nodes", [])],
        )


def devnet_dir(explicit: Path | None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    try:
        pointed = Path(latest_pointer().read_text().strip())
        if (pointed / STATE_FILE).exists():
            return pointed
    except OSError:
        pass
    return default_devnet_dir()


def load_state(directory: Path | None) -> DevnetState:
    root = devnet_dir(directory)
    path = root / STATE_FILE
    try:
        return DevnetState.from_dict(json.loads(path.read_text()))
    except FileNotFoundError as exc:
        raise DevnetError(
            f"no devnet in {root} (start one with `crystalmesh devnet up`)"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise DevnetError(f"{path} is damaged: {exc}") from exc


def save_state(state: DevnetState) -> None:
    root = Path(state.dir)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state.to_dict(), indent=2))
    os.replace(tmp, root / STATE_FILE)
    latest_pointer().parent.mkdir(parents=True, exist_ok=True)
    latest_pointer().write_text(str(root) + "\n")


def resolve_node_dir(name: str, directory: Path | None) -> Path:
    state = load_state(directory)
    return Path(state.node(name).data_dir)
