"""Ed25519 node identities and libp2p peer ids.

One Ed25519 key is both a node's libp2p identity and the key that signs its
envelopes, so a peer id and an envelope ``sender`` always name the same node.
The libp2p key pair for an :class:`Identity` is
``libp2p.crypto.ed25519.create_new_key_pair(identity.seed)``.

A peer id is the libp2p encoding of the public key: the protobuf message
``PublicKey { Type = Ed25519 (1), Data = <32-byte key> }`` wrapped in an
*identity* multihash (code 0x00), written in base58btc. For Ed25519 that is
always ``12D3KooW...``.
"""

from __future__ import annotations

import secrets

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import SigningKey, VerifyKey

__all__ = [
    "PUBLIC_KEY_BYTES",
    "SEED_BYTES",
    "SIGNATURE_BYTES",
    "Identity",
    "peer_id_from_public_key",
    "public_key_from_peer_id",
    "verify",
]

SEED_BYTES = 32
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64

# protobuf: field 1 (Type, varint) = 1 (Ed25519); field 2 (Data, bytes) of length 32;
# then the identity multihash header: code 0x00, digest length 36.
_PROTOBUF_PREFIX = bytes([0x08, 0x01, 0x12, PUBLIC_KEY_BYTES])
_MULTIHASH_PREFIX = bytes([0x00, len(_PROTOBUF_PREFIX) + PUBLIC_KEY_BYTES])
_PEER_ID_PREFIX = _MULTIHASH_PREFIX + _PROTOBUF_PREFIX

_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {char: index for index, char in enumerate(_BASE58_ALPHABET)}


class Identity:
    """An Ed25519 signing key. Holds the secret seed: never log or gossip it."""

    __slots__ = ("_signing_key",)

    def __init__(self, signing_key: SigningKey) -> None:
        self._signing_key = signing_key

    @classmethod
    def generate(cls) -> Identity:
        return cls.from_seed(secrets.token_bytes(SEED_BYTES))

    @classmethod
    def from_seed(cls, seed: bytes) -> Identity:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is exactly {SEED_BYTES} bytes")
        return cls(SigningKey(seed))

    @property
    def seed(self) -> bytes:
        return bytes(self._signing_key)

    @property
    def public_key(self) -> bytes:
        return bytes(self._signing_key.verify_key)

    @property
    def peer_id(self) -> str:
        return peer_id_from_public_key(self.public_key)

    def sign(self, data: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``data``."""
        return self._signing_key.sign(data).signature

    def __repr__(self) -> str:
        return f"Identity(peer_id={self.peer_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.public_key == self.public_key

    def __hash__(self) -> int:
        return hash(self.public_key)


def verify(public_key: bytes, data: bytes, signature: bytes) -> bool:
    """True if ``signature`` is a valid Ed25519 signature of ``data``; never raises."""
    if not (
        isinstance(public_key, bytes)
        and isinstance(data, bytes)
        and isinstance(signature, bytes)
        and len(public_key) == PUBLIC_KEY_BYTES
        and len(signature) == SIGNATURE_BYTES
    ):
        return False
    try:
        VerifyKey(public_key).verify(data, signature)
    except (BadSignatureError, CryptoError, ValueError, TypeError):
        return False
    return True


def peer_id_from_public_key(public_key: bytes) -> str:
    """The libp2p peer id (base58btc string) of a 32-byte Ed25519 public key."""
    if not isinstance(public_key, bytes) or len(public_key) != PUBLIC_KEY_BYTES:
        raise ValueError(f"an Ed25519 public key is exactly {PUBLIC_KEY_BYTES} bytes")
    return _base58_encode(_PEER_ID_PREFIX + public_key)


def public_key_from_peer_id(peer_id: str) -> bytes:
    """Inverse of :func:`peer_id_from_public_key`; ValueError for non-Ed25519 peer ids."""
    raw = _base58_decode(peer_id)
    if len(raw) != len(_PEER_ID_PREFIX) + PUBLIC_KEY_BYTES or not raw.startswith(_PEER_ID_PREFIX):
        raise ValueError("not an Ed25519 identity-multihash peer id")
    return raw[len(_PEER_ID_PREFIX) :]


def _base58_encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    digits = []
    while number:
        number, remainder = divmod(number, 58)
        digits.append(_BASE58_ALPHABET[remainder])
    leading_zeros = len(data) - len(data.lstrip(b"\x00"))
    return "1" * leading_zeros + "".join(reversed(digits))


def _base58_decode(text: str) -> bytes:
    if not isinstance(text, str) or not text or len(text) > 128:
        raise ValueError("not a base58 string")
    number = 0
    for char in text:
        if char not in _BASE58_INDEX:
            raise ValueError(f"invalid base58 character {char!r}")
        number = number * 58 + _BASE58_INDEX[char]
    leading_zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\x00" * leading_zeros + body
