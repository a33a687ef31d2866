"""The last good peers, kept in the data dir so that a restart does not depend on the bootstrap list.

``<data dir>/peers.json``::

    {"version": 1, "network": "devnet",
     "peers": [{"peer_id": "12D3KooW…", "addrs": ["/ip4/203.0.113.7/tcp/4001"],
                "seen_ms": 1767225600000}]}

A peer is *good* when we were connected to it and identify said it speaks our
network's protocols. The list is newest first (``seen_ms``, when we last saw
it connected), at most ``MAX_PEERS`` peers of at most ``MAX_ADDRS`` addresses,
and forgets peers not seen for ``MAX_AGE_MS``. It is written atomically (a
temporary file in the same directory, fsync, rename), so a crash leaves the old
file or the new one, never half of either.

The file is untrusted input when read back: another process or a disk fault
may have written anything there. It is read without following a symlink, only
if it is a regular file of at most ``MAX_FILE_BYTES``, and every field is
checked (peer ids canonical base58, addresses parseable ``/ip4|ip6|dns*/…/tcp/<port>``
multiaddrs without a peer id, no duplicates, not our own id, the same network).
Anything else — truncated JSON, a crafted entry, a file of another network —
makes ``read`` log one warning and return nothing: the node then starts from
its bootstrap list as if the file were absent. Dialling a saved address proves
nothing by itself either: the Noise handshake checks the peer id.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import multiaddr
from libp2p.peer.id import ID

logger = logging.getLogger(__name__)

VERSION = 1
MAX_PEERS = 64
MAX_ADDRS = 8
MAX_ADDR_CHARS = 200
MAX_PEER_ID_CHARS = 128
MAX_FILE_BYTES = 64 * 1024
MAX_AGE_MS = 7 * 86_400_000
_HOST_PROTOCOLS = frozenset({"ip4", "ip6", "dns", "dns4", "dns6"})


class InvalidPeerFile(ValueError):
    """peers.json is not a file this node wrote (corrupted, crafted, or another network's)."""


@dataclass(frozen=True)
class SavedPeer:
    peer_id: str
    addrs: tuple[str, ...]
    seen_ms: int

    def dial_addrs(self) -> list[str]:
        """Each address with ``/p2p/<peer id>`` appended, as the peer manager keeps them."""
        return [f"{addr}/p2p/{self.peer_id}" for addr in self.addrs]


def storable_addr(addr: str) -> str | None:
    """``addr`` without a trailing ``/p2p/<id>`` if it is a plain TCP address we store, else None."""
    text = addr.split("/p2p/", 1)[0]
    if len(text) > MAX_ADDR_CHARS:
        return None
    try:
        names = [protocol.name for protocol in multiaddr.Multiaddr(text).protocols()]
    except Exception:
        return None
    if len(names) != 2 or names[0] not in _HOST_PROTOCOLS or names[1] != "tcp":
        return None
    return text


def _check_peer(raw: Any, network_own: str, seen: set[str]) -> SavedPeer:
    if not isinstance(raw, dict) or set(raw) != {"peer_id", "addrs", "seen_ms"}:
        raise InvalidPeerFile("a peer entry is not {peer_id, addrs, seen_ms}")
    peer_id, addrs, seen_ms = raw["peer_id"], raw["addrs"], raw["seen_ms"]
    if not isinstance(peer_id, str) or not 0 < len(peer_id) <= MAX_PEER_ID_CHARS:
        raise InvalidPeerFile("peer_id is not a short string")
    try:
        canonical = str(ID.from_base58(peer_id))
    except Exception:
        raise InvalidPeerFile(f"peer_id {peer_id[:60]!r} is not a peer id") from None
    if canonical != peer_id or peer_id == network_own or peer_id in seen:
        raise InvalidPeerFile(f"peer_id {peer_id[:60]!r} is not canonical, ours, or repeated")
    if isinstance(seen_ms, bool) or not isinstance(seen_ms, int) or not 0 <= seen_ms < 2**63:
        raise InvalidPeerFile("seen_ms is not a non-negative integer")
    if not isinstance(addrs, list) or not 0 < len(addrs) <= MAX_ADDRS:
        raise InvalidPeerFile(f"addrs is not a list of 1 to {MAX_ADDRS} addresses")
    checked: list[str] = []
    for addr in addrs:
        if not isinstance(addr, str) or storable_addr(addr) != addr or addr in checked:
            raise InvalidPeerFile(f"address {str(addr)[:80]!r} is not a plain TCP multiaddr")
        checked.append(addr)
    seen.add(peer_id)
    return SavedPeer(peer_id, tuple(checked), seen_ms)


def parse(data: bytes, network: str, own_peer_id: str) -> list[SavedPeer]:
    """The peers in a peers.json body; ``InvalidPeerFile`` unless every field checks out."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidPeerFile(f"over {MAX_FILE_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise InvalidPeerFile(f"not JSON: {error}") from None
    if not isinstance(document, dict) or set(document) != {"version", "network", "peers"}:
        raise InvalidPeerFile("not a {version, network, peers} object")
    if document["version"] != VERSION or isinstance(document["version"], bool):
        raise InvalidPeerFile(f"version {document['version']!r} is not {VERSION}")
    if document["network"] != network:
        raise InvalidPeerFile(f"peers of network {str(document['network'])[:40]!r}, not {network!r}")
    peers = document["peers"]
    if not isinstance(peers, list) or len(peers) > MAX_PEERS:
        raise InvalidPeerFile(f"peers is not a list of at most {MAX_PEERS}")
    seen: set[str] = set()
    return [_check_peer(raw, own_peer_id, seen) for raw in peers]


def encode(peers: Iterable[SavedPeer], network: str) -> bytes:
    body = {"version": VERSION, "network": network,
            "peers": [{"peer_id": p.peer_id, "addrs": list(p.addrs), "seen_ms": p.seen_ms}
                      for p in peers]}
    return json.dumps(body, indent=1, sort_keys=True).encode()


def read(path: Path, network: str, own_peer_id: str) -> list[SavedPeer]:
    """The saved peers, or ``[]`` (with a warning) when the file is missing or not trustworthy."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return []
    except OSError as error:
        logger.warning("saved peers ignored path=%s error=%s", path, error)
        return []
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise InvalidPeerFile(f"not a regular file of at most {MAX_FILE_BYTES} bytes")
        data = os.read(fd, MAX_FILE_BYTES + 1)
        return parse(data, network, own_peer_id)
    except (OSError, InvalidPeerFile) as error:
        logger.warning("saved peers ignored path=%s error=%s", path, error)
        return []
    finally:
        os.close(fd)


def write(path: Path, peers: Iterable[SavedPeer], network: str) -> None:
    """Replace ``path`` atomically with ``peers`` (mode 0600)."""
    data = encode(peers, network)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def merge(saved: Iterable[SavedPeer], connected: Iterable[SavedPeer], now_ms: int) -> list[SavedPeer]:
    """``connected`` (seen now) first, then older saved peers; bounded and aged out."""
    merged: dict[str, SavedPeer] = {}
    for peer in sorted(connected, key=lambda p: p.peer_id):
        merged.setdefault(peer.peer_id, peer)
    for peer in sorted(saved, key=lambda p: -p.seen_ms):
        if peer.peer_id not in merged and now_ms - peer.seen_ms <= MAX_AGE_MS:
            merged[peer.peer_id] = peer
    return sorted(merged.values(), key=lambda p: (-p.seen_ms, p.peer_id))[:MAX_PEERS]
