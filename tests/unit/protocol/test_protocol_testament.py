"""Testament files: signed, versioned, bounded; crafted files are refused whole."""

from __future__ import annotations

import cbor2
import pytest

from protocol.codec import encode
from protocol.identity import Identity
from protocol.testament import (
    MAX_ENTRIES,
    InvalidTestament,
    TestamentEntry,
    open_testament,
    seal_testament,
    signing_bytes,
)

SIGNER = Identity.from_seed(bytes(range(32)))


def entry(i: int, kind: str = "fact", text: str | None = None) -> TestamentEntry:
    return TestamentEntry(
        id=f"e-{i}",
        kind=kind,
        text=text or f"knowledge number {i}",
        namespace="agent:alpha",
        confidence_ppm=700_000,
        generation=0,
        episode_count=3,
        source_episodes=("ep-1", "ep-2", "ep-3"),
        links=(),
        created_at_ms=1_700_000_000_000,
    )


def test_round_trip_and_signer() -> None:
    data = seal_testament(SIGNER, [entry(1), entry(2, "warning")], 1_700_000_000_001)
    testament = open_testament(data)
    assert testament.body.signer == SIGNER.public_key
    assert testament.signer_peer_id == SIGNER.peer_id
    assert [e.kind for e in testament.body.entries] == ["fact", "warning"]
    assert testament.version == 1


def test_every_flipped_byte_is_refused() -> None:
    data = seal_testament(SIGNER, [entry(1)], 1)
    for position in range(0, len(data), 7):
        tampered = bytearray(data)
        tampered[position] ^= 0x01
        with pytest.raises(InvalidTestament):
            open_testament(bytes(tampered))


def test_resigned_by_another_key_with_the_original_signer_is_refused() -> None:
    data = seal_testament(SIGNER, [entry(1)], 1)
    testament = open_testament(data)
    forged = cbor2.loads(data)
    forged["signature"] = Identity.generate().sign(signing_bytes(testament.body))
    with pytest.raises(InvalidTestament, match="bad signature"):
        open_testament(encode(forged))


def test_more_than_the_bottleneck_is_refused() -> None:
    with pytest.raises(InvalidTestament):
        seal_testament(SIGNER, [entry(i) for i in range(MAX_ENTRIES + 1)], 1)
    # a crafted file carrying 2,049 entries with a valid signature is refused too
    body = {
        "signer": SIGNER.public_key,
        "issued_at_ms": 1,
        "entries": [entry(i).to_body() for i in range(MAX_ENTRIES + 1)],
    }
    payload = {"version": 1, "body": body}
    signature = SIGNER.sign(b"crystalmesh/testament/v1\x00" + encode(payload))
    with pytest.raises(InvalidTestament, match="2049 items"):
        open_testament(encode(payload | {"signature": signature}))


def test_oversize_deeply_nested_and_malformed_files_are_refused() -> None:
    with pytest.raises(InvalidTestament, match="oversize"):
        open_testament(b"\x00" * 100, max_size=50)
    nested: object = "x"
    for _ in range(40):
        nested = [nested]
    with pytest.raises(InvalidTestament):
        open_testament(cbor2.dumps({"version": 1, "body": nested, "signature": b"0" * 64}))
    with pytest.raises(InvalidTestament):
        open_testament(b"not cbor at all")
    with pytest.raises(InvalidTestament):
        open_testament(cbor2.dumps({"version": 2, "body": {}, "signature": b"0" * 64}))


def test_unknown_kind_and_duplicate_ids_are_refused() -> None:
    with pytest.raises(ValueError):
        entry(1, kind="root_password")
    with pytest.raises(InvalidTestament, match="duplicate ids"):
        seal_testament(SIGNER, [entry(1), entry(1)], 1)
