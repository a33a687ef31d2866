"""peers.json: written atomically and bounded; read back as untrusted input (a corrupted or
crafted file is ignored with a warning and never raises)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.net import saved_peers
from node.net.host import peer_id_from_seed
from node.net.saved_peers import MAX_PEERS, SavedPeer, merge, parse, read, write

OWN = str(peer_id_from_seed(b"\x01" * 32))
PEERS = [str(peer_id_from_seed(bytes([index]) * 32)) for index in range(2, 6)]


def peer(index: int, seen_ms: int = 1_000, port: int = 4001) -> SavedPeer:
    return SavedPeer(PEERS[index], (f"/ip4/127.0.0.1/tcp/{port}",), seen_ms)


def document(**changes: object) -> bytes:
    body: dict[str, object] = {"version": 1, "network": "devnet", "peers": [
        {"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/4001"], "seen_ms": 5}]}
    body.update(changes)
    return json.dumps(body).encode()


def test_round_trip_atomic_and_private(tmp_path: Path) -> None:
    path = tmp_path / "peers.json"
    written = [peer(0, 2_000), peer(1, 1_000)]
    write(path, written, "devnet")
    assert read(path, "devnet", OWN) == written
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["peers.json"]  # no temporary file left
    assert written[0].dial_addrs() == [f"/ip4/127.0.0.1/tcp/4001/p2p/{PEERS[0]}"]


def test_merge_puts_connected_first_bounds_and_ages_out() -> None:
    old = [peer(0, 10), peer(1, 20)]
    now = saved_peers.MAX_AGE_MS + 15
    merged = merge(old, [peer(2, now), peer(1, now, port=4002)], now)
    assert [p.peer_id for p in merged] == sorted([PEERS[1], PEERS[2]])  # PEERS[0] aged out
    assert {p.peer_id: p.addrs for p in merged}[PEERS[1]] == ("/ip4/127.0.0.1/tcp/4002",)
    many = [SavedPeer(str(peer_id_from_seed(i.to_bytes(32, "big"))), ("/ip4/1.2.3.4/tcp/1",), i)
            for i in range(10, 10 + 2 * MAX_PEERS)]
    assert len(merge(many, [], 1_000)) == MAX_PEERS


@pytest.mark.parametrize("data", [
    b"",
    b"{",  # truncated
    document()[:-3],
    b"[" * 50_000,  # nesting bomb
    b"\xff\xfe garbage",
    document(version=2),
    document(version=True),
    document(network="mainnet"),  # another network's peers
    document(extra=1),
    document(peers={}),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/4001"], "seen_ms": 5}] * 2),
    document(peers=[{"peer_id": OWN, "addrs": ["/ip4/10.0.0.1/tcp/4001"], "seen_ms": 5}]),
    document(peers=[{"peer_id": "not-a-peer-id", "addrs": ["/ip4/10.0.0.1/tcp/4001"], "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": [], "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/udp/1"], "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": [f"/ip4/10.0.0.1/tcp/1/p2p/{PEERS[0]}"],
                     "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"] * 2, "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/99999"], "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"], "seen_ms": -1}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"], "seen_ms": "5"}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"]}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"] * 9, "seen_ms": 5}]),
    document(peers=[{"peer_id": PEERS[0], "addrs": ["/ip4/10.0.0.1/tcp/1"], "seen_ms": 5}]
             * (MAX_PEERS + 1)),
])
def test_a_corrupted_or_crafted_file_is_ignored_with_a_warning(
        tmp_path: Path, data: bytes, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "peers.json"
    path.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="node.net.saved_peers"):
        assert read(path, "devnet", OWN) == []
    assert "saved peers ignored" in caplog.text


def test_a_valid_document_is_read(tmp_path: Path) -> None:
    path = tmp_path / "peers.json"
    path.write_bytes(document())
    assert read(path, "devnet", OWN) == [SavedPeer(PEERS[0], ("/ip4/10.0.0.1/tcp/4001",), 5)]


def test_oversize_symlink_fifo_and_directory_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "peers.json"
    path.write_bytes(b" " * (saved_peers.MAX_FILE_BYTES + 1) + document())
    assert read(path, "devnet", OWN) == []
    target = tmp_path / "elsewhere.json"
    target.write_bytes(document())
    path.unlink()
    path.symlink_to(target)
    assert read(path, "devnet", OWN) == []
    path.unlink()
    os.mkfifo(path)  # would block a plain open() forever
    assert read(path, "devnet", OWN) == []
    path.unlink()
    path.mkdir()
    assert read(path, "devnet", OWN) == []
    assert read(tmp_path / "missing.json", "devnet", OWN) == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30).map(lambda value: json.dumps(value).encode()))
def test_parse_never_raises_anything_but_invalid_peer_file(data: bytes) -> None:
    try:
        parse(data, "devnet", OWN)
    except saved_peers.InvalidPeerFile:
        pass
