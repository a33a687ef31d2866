"""Ed25519 identities, and peer ids equal to py-libp2p's."""

from __future__ import annotations

import pytest
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.peer.id import ID

from protocol.identity import (
    Identity,
    peer_id_from_public_key,
    public_key_from_peer_id,
    verify,
)

SEEDS = [bytes(32), bytes(range(32)), b"\xff" * 32, bytes.fromhex("9d" * 32)]


@pytest.mark.parametrize("seed", SEEDS)
def test_peer_id_matches_py_libp2p(seed: bytes) -> None:
    identity = Identity.from_seed(seed)
    key_pair = create_new_key_pair(seed)
    assert key_pair.public_key.to_bytes() == identity.public_key
    assert ID.from_pubkey(key_pair.public_key).to_base58() == identity.peer_id
    assert identity.peer_id.startswith("12D3KooW")


def test_peer_id_matches_py_libp2p_for_generated_keys() -> None:
    for _ in range(20):
        identity = Identity.generate()
        libp2p_id = ID.from_pubkey(create_new_key_pair(identity.seed).public_key)
        assert libp2p_id.to_base58() == identity.peer_id
        assert public_key_from_peer_id(identity.peer_id) == identity.public_key


def test_signatures_interoperate_with_py_libp2p_keys() -> None:
    identity = Identity.from_seed(bytes(range(32)))
    key_pair = create_new_key_pair(identity.seed)
    assert key_pair.private_key.sign(b"hello") == identity.sign(b"hello")
    assert key_pair.public_key.verify(b"hello", identity.sign(b"hello"))


def test_seed_round_trip_and_sign_verify() -> None:
    identity = Identity.generate()
    again = Identity.from_seed(identity.seed)
    assert again == identity and hash(again) == hash(identity)
    assert len(identity.seed) == 32 and len(identity.public_key) == 32
    signature = identity.sign(b"data")
    assert len(signature) == 64
    assert verify(identity.public_key, b"data", signature)
    assert identity.seed.hex() not in repr(identity)


def test_verify_never_raises() -> None:
    identity = Identity.generate()
    signature = identity.sign(b"data")
    assert not verify(identity.public_key, b"datA", signature)
    assert not verify(identity.public_key, b"data", signature[:-1] + bytes([signature[-1] ^ 1]))
    assert not verify(Identity.generate().public_key, b"data", signature)
    assert not verify(identity.public_key[:31], b"data", signature)
    assert not verify(identity.public_key, b"data", signature[:63])
    assert not verify(b"\xff" * 32, b"data", signature)  # not a curve point
    assert not verify(bytes(32), b"data", bytes(64))
    assert not verify("key", b"data", signature)  # type: ignore[arg-type]
    assert not verify(identity.public_key, "data", signature)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [b"", bytes(31), bytes(33), "x" * 32])
def test_from_seed_rejects_wrong_length(seed: object) -> None:
    with pytest.raises(ValueError):
        Identity.from_seed(seed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "peer_id",
    [
        "",
        "0OIl",
        "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N",  # sha256 multihash (RSA-style)
        "12D3KooW",
    ],
)
def test_public_key_from_peer_id_rejects(peer_id: str) -> None:
    with pytest.raises(ValueError):
        public_key_from_peer_id(peer_id)


def test_peer_id_from_public_key_rejects_wrong_length() -> None:
    with pytest.raises(ValueError):
        peer_id_from_public_key(bytes(31))
