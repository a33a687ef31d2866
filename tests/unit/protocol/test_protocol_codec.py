"""Canonical CBOR: round-trips, determinism and strict decoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import MAX_DEPTH, MAX_MESSAGE_BYTES, CodecError, decode, encode

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.binary(max_size=40)
    | st.text(max_size=20)
)
wire_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(wire_values)
def test_round_trip_is_identity(value: Any) -> None:
    if depth(value) > MAX_DEPTH:
        with pytest.raises(CodecError):
            encode(value)
        return
    data = encode(value)
    decoded = decode(data)
    assert decoded == value
    assert encode(decoded) == data


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=30), st.integers(0, 2**64 - 1), max_size=10))
def test_map_encoding_ignores_insertion_order(mapping: dict[str, int]) -> None:
    reversed_mapping = dict(reversed(list(mapping.items())))
    assert encode(mapping) == encode(reversed_mapping)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_only_raise_codec_error(data: bytes) -> None:
    try:
        value = decode(data)
    except CodecError:
        return
    assert encode(value) == data


@settings(max_examples=200, deadline=None)
@given(wire_values, st.binary(min_size=1, max_size=4))
def test_trailing_bytes_rejected(value: Any, tail: bytes) -> None:
    if depth(value) > MAX_DEPTH:
        return
    with pytest.raises(CodecError):
        decode(encode(value) + tail)


def test_rfc8949_deterministic_examples() -> None:
    # Keys sorted bytewise by their encoding: shorter text keys first.
    assert encode({"b": 1, "a": 2, "aa": 3}).hex() == "a3616102616201626161" + "03"
    assert encode(23).hex() == "17"
    assert encode(24).hex() == "1818"
    assert encode(-1).hex() == "20"
    assert encode(2**32).hex() == "1b0000000100000000"
    assert encode(True).hex() == "f5"
    assert encode(None).hex() == "f6"
    assert encode(b"\x01").hex() == "4101"


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        0.0,
        float("nan"),
        (1, 2),
        {1: "a"},
        {b"k": 1},
        {"a": {1, 2}},
        2**64,
        -(2**64) - 1,
        "\ud800",
    ],
)
def test_encode_refuses_values_outside_the_data_model(value: Any) -> None:
    with pytest.raises(CodecError):
        encode(value)


def test_encode_refuses_too_deep_nesting() -> None:
    value: Any = 0
    for _ in range(MAX_DEPTH):
        value = [value]
    assert decode(encode(value)) == value
    with pytest.raises(CodecError):
        encode([value])


@pytest.mark.parametrize(
    ("hex_input", "why"),
    [
        ("", "empty"),
        ("1801", "non-minimal integer"),
        ("190001", "non-minimal integer"),
        ("5801ff", "non-minimal length"),
        ("0100", "trailing byte"),
        ("a2616201616101", "unsorted keys"),
        ("a2616101616102", "duplicate keys"),
        ("a10101", "integer key"),
        ("a1410101", "bytes key"),
        ("9f01ff", "indefinite array"),
        ("5f4101ff", "indefinite bytes"),
        ("bf616101ff", "indefinite map"),
        ("f97e00", "half float"),
        ("fb3ff8000000000000", "double float"),
        ("f7", "undefined"),
        ("f0", "simple value"),
        ("c074323031332d30332d32315432303a30343a30305a", "datetime tag"),
        ("c24101", "bignum tag"),
        ("c249010000000000000000", "large bignum"),
        ("d9d9f701", "self-describe tag"),
        ("d82a4101", "unknown tag"),
        ("62c328", "invalid utf-8"),
        ("18", "truncated"),
        ("ff", "break without start"),
    ],
)
def test_decode_rejects(hex_input: str, why: str) -> None:
    with pytest.raises(CodecError):
        decode(bytes.fromhex(hex_input))


def test_decode_rejects_deep_nesting_and_oversize() -> None:
    with pytest.raises(CodecError):
        decode(bytes.fromhex("81" * (MAX_DEPTH + 1) + "01"))
    assert decode(bytes.fromhex("81" * MAX_DEPTH + "01")) is not None
    with pytest.raises(CodecError, match="oversize"):
        decode(b"\x00" * (MAX_MESSAGE_BYTES + 1))
    with pytest.raises(CodecError, match="oversize"):
        decode(encode("x" * 100), max_size=50)


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(CodecError):
        decode("a1")  # type: ignore[arg-type]
    assert decode(bytearray(b"\x01")) == 1
