"""The worked example of docs/protocol.md, so the document cannot drift from the code."""

from __future__ import annotations

from pathlib import Path

from libp2p.crypto.ed25519 import create_new_key_pair

from protocol.envelope import open_envelope, seal
from protocol.identity import Identity
from protocol.messages import WeatherAlert

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"

SEED = bytes(range(32))
PUBLIC_KEY = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
PEER_ID = "12D3KooWA4Xop1JaT3MHxwYMkCepYsv4iPVopMXwCz5iHYdBfeSB"
SIGNING_BYTES = (
    "6372797374616c6d6573682f656e76656c6f70652f763100a663736571182a64"
    "626f6479a466726561736f6e6f706f69736f6e656420736b696c6c736c697373"
    "7565645f61745f6d731b0000018bcfe568006d657870697265735f61745f6d73"
    "1b0000018bd000df4072636f727469736f6c5f6c6576656c5f70706d1a000b71"
    "b0646b696e646d776561746865725f616c6572746673656e646572582003a107"
    "bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8677665"
    "7273696f6e016c6973737565645f61745f6d731b0000018bcfe56800"
)
SIGNATURE = (
    "eb368ecd4877fe3236b16ad0835da6f081c4fd4312712a057a9ff9e4b1728c0f"
    "0b30e80fee0813d97cac39215e51e137988957e5d633ebbb5f7d202b32282601"
)
ENVELOPE = (
    "a763736571182a64626f6479a466726561736f6e6f706f69736f6e656420736b"
    "696c6c736c6973737565645f61745f6d731b0000018bcfe568006d6578706972"
    "65735f61745f6d731b0000018bd000df4072636f727469736f6c5f6c6576656c"
    "5f70706d1a000b71b0646b696e646d776561746865725f616c6572746673656e"
    "646572582003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc86"
    "64125531b86776657273696f6e01697369676e61747572655840eb368ecd4877"
    "fe3236b16ad0835da6f081c4fd4312712a057a9ff9e4b1728c0f0b30e80fee08"
    "13d97cac39215e51e137988957e5d633ebbb5f7d202b322826016c6973737565"
    "645f61745f6d731b0000018bcfe56800"
)

ALERT = WeatherAlert(
    cortisol_level_ppm=750_000,
    issued_at_ms=1_700_000_000_000,
    expires_at_ms=1_700_001_800_000,
    reason="poisoned skills",
)


def test_vector_is_reproduced_by_the_code() -> None:
    identity = Identity.from_seed(SEED)
    assert identity.public_key.hex() == PUBLIC_KEY
    assert identity.peer_id == PEER_ID
    data = seal(identity, "weather_alert", ALERT, seq=42, issued_at_ms=1_700_000_000_000)
    assert data.hex() == ENVELOPE
    envelope = open_envelope(data)
    assert envelope.signing_bytes().hex() == SIGNING_BYTES
    assert envelope.signature.hex() == SIGNATURE
    assert envelope.message() == ALERT


def test_vector_signature_verifies_with_py_libp2p() -> None:
    key_pair = create_new_key_pair(SEED)
    assert key_pair.public_key.verify(bytes.fromhex(SIGNING_BYTES), bytes.fromhex(SIGNATURE))


def test_vector_appears_in_the_protocol_document() -> None:
    text = "".join(DOC.read_text(encoding="utf-8").split())
    for value in (PUBLIC_KEY, PEER_ID, SIGNING_BYTES, SIGNATURE, ENVELOPE):
        assert value in text
