"""Signed envelopes: seal/open, rejection reasons, tamper and mutation robustness."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from protocol.codec import MAX_MESSAGE_BYTES, decode, encode
from protocol.envelope import (
    ENVELOPE_DOMAIN,
    REASON_BAD_BODY,
    REASON_BAD_SIGNATURE,
    REASON_MALFORMED,
    REASON_OVERSIZE,
    REASON_UNKNOWN_KIND,
    REJECTION_REASONS,
    Envelope,
    InvalidEnvelope,
    open_envelope,
    seal,
    sign_envelope,
)
from protocol.identity import Identity, verify
from protocol.messages import Message, SkillListing, WeatherAlert
from protocol.topics import PURCHASE_EXCHANGES, TOPIC_KINDS
from tests.fixtures.messages import (
    MANAGEMENT,
    SELLER,
    T0_MS,
    sample_listing,
    sample_messages,
    sample_weather,
)


def sealed_listing(seq: int = 5) -> bytes:
    return seal(SELLER, SkillListing.KIND, sample_listing(), seq, T0_MS)


def reason_of(data: Any) -> str:
    with pytest.raises(InvalidEnvelope) as caught:
        open_envelope(data)
    assert caught.value.reason in REJECTION_REASONS
    return caught.value.reason


def reseal_raw(fields: dict[str, Any], identity: Identity = SELLER) -> bytes:
    """Re-sign an arbitrary envelope map (bypassing seal's validation)."""
    envelope = sign_envelope(
        identity,
        fields["kind"],
        fields["version"],
        fields["body"],
        fields["seq"],
        fields["issued_at_ms"],
    )
    return envelope.to_bytes()


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: m.KIND)
def test_seal_open_round_trip(message: Message) -> None:
    identity = MANAGEMENT if isinstance(message, WeatherAlert) else SELLER
    data = seal(identity, message.KIND, message, 9, T0_MS)
    envelope = open_envelope(data)
    assert envelope.kind == message.KIND and envelope.version == message.VERSION
    assert envelope.sender == identity.public_key
    assert envelope.peer_id == identity.peer_id
    assert (envelope.seq, envelope.issued_at_ms) == (9, T0_MS)
    assert envelope.message() == message
    assert envelope.to_bytes() == data
    # The signature is over the domain prefix plus the six other fields.
    assert verify(identity.public_key, envelope.signing_bytes(), envelope.signature)
    assert envelope.signing_bytes().startswith(ENVELOPE_DOMAIN)
    signed = decode(envelope.signing_bytes()[len(ENVELOPE_DOMAIN) :])
    assert set(signed) == {"kind", "version", "sender", "seq", "issued_at_ms", "body"}


def test_seal_accepts_a_body_dict() -> None:
    data = seal(SELLER, "skill_listing", sample_listing().to_body(), 1, T0_MS)
    assert open_envelope(data).message() == sample_listing()


def test_seal_refuses_what_receivers_reject() -> None:
    with pytest.raises(InvalidEnvelope) as caught:
        seal(SELLER, "weather_alert", sample_listing(), 1, T0_MS)
    assert caught.value.reason == REASON_UNKNOWN_KIND
    with pytest.raises(InvalidEnvelope) as caught:
        seal(SELLER, "no_such_kind", {}, 1, T0_MS)
    assert caught.value.reason == REASON_UNKNOWN_KIND
    with pytest.raises(InvalidEnvelope) as caught:
        seal(SELLER, "weather_alert", {"cortisol_level_ppm": 1}, 1, T0_MS)
    assert caught.value.reason == REASON_BAD_BODY
    with pytest.raises(InvalidEnvelope) as caught:  # listing id belongs to SELLER
        seal(MANAGEMENT, "skill_listing", sample_listing(), 1, T0_MS)
    assert caught.value.reason == REASON_BAD_BODY
    with pytest.raises(InvalidEnvelope) as caught:  # weather issued_at differs
        seal(MANAGEMENT, "weather_alert", sample_weather(), 1, T0_MS + 1)
    assert caught.value.reason == REASON_BAD_BODY
    with pytest.raises(InvalidEnvelope) as caught:
        seal(SELLER, "skill_listing", sample_listing(), -1, T0_MS)
    assert caught.value.reason == REASON_MALFORMED


def test_oversize_rejected_before_decoding() -> None:
    assert reason_of(b"\xff" * (MAX_MESSAGE_BYTES + 1)) == REASON_OVERSIZE
    data = sealed_listing()
    with pytest.raises(InvalidEnvelope) as caught:
        open_envelope(data, max_size=len(data) - 1)
    assert caught.value.reason == REASON_OVERSIZE


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"garbage", encode([1, 2]), encode({"kind": "x"}), "text", None],
)
def test_malformed(data: Any) -> None:
    assert reason_of(data) == REASON_MALFORMED


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kind", ""),
        ("kind", "Skill Listing"),
        ("kind", 1),
        ("version", 0),
        ("version", "1"),
        ("sender", b"\x00" * 31),
        ("seq", -1),
        ("seq", True),
        ("issued_at_ms", -1),
        ("body", [1]),
        ("signature", b"\x00" * 63),
    ],
)
def test_malformed_fields(key: str, value: Any) -> None:
    fields = decode(sealed_listing())
    fields[key] = value
    assert reason_of(encode(fields)) == REASON_MALFORMED


def test_missing_or_extra_envelope_keys() -> None:
    fields = decode(sealed_listing())
    assert reason_of(encode({**fields, "extra": 1})) == REASON_MALFORMED
    del fields["seq"]
    assert reason_of(encode(fields)) == REASON_MALFORMED


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kind", "weather_alert"),
        ("version", 2),
        ("sender", MANAGEMENT.public_key),
        ("seq", 6),
        ("issued_at_ms", T0_MS + 1),
        ("signature", b"\x00" * 64),
    ],
)
def test_tampered_signed_fields_fail_signature(key: str, value: Any) -> None:
    fields = decode(sealed_listing())
    fields[key] = value
    assert reason_of(encode(fields)) == REASON_BAD_SIGNATURE


def test_tampered_body_fails_signature() -> None:
    fields = decode(sealed_listing())
    fields["body"]["price_micro_usdc"] = 1
    assert reason_of(encode(fields)) == REASON_BAD_SIGNATURE


def test_signature_without_domain_prefix_is_rejected() -> None:
    fields = decode(sealed_listing())
    signed = {key: value for key, value in fields.items() if key != "signature"}
    fields["signature"] = SELLER.sign(encode(signed))
    assert reason_of(encode(fields)) == REASON_BAD_SIGNATURE


def test_unknown_kind_and_bad_body_are_attributed_to_the_signer() -> None:
    fields = decode(sealed_listing())
    for kind, version in (("skill_listing", 2), ("new_thing", 1)):
        data = reseal_raw({**fields, "kind": kind, "version": version})
        with pytest.raises(InvalidEnvelope) as caught:
            open_envelope(data)
        assert caught.value.reason == REASON_UNKNOWN_KIND
        assert caught.value.sender == SELLER.public_key
    bad_body = {**fields["body"], "successes": 11}
    with pytest.raises(InvalidEnvelope) as caught:
        open_envelope(reseal_raw({**fields, "body": bad_body}))
    assert caught.value.reason == REASON_BAD_BODY
    assert caught.value.sender == SELLER.public_key


def test_listing_from_the_wrong_seller_is_bad_body() -> None:
    fields = decode(sealed_listing())
    data = reseal_raw(fields, identity=MANAGEMENT)
    assert reason_of(data) == REASON_BAD_BODY


def test_message_on_an_unopened_envelope() -> None:
    envelope = sign_envelope(SELLER, "skill_listing", 1, {"x": 1}, 1, T0_MS)
    with pytest.raises(InvalidEnvelope) as caught:
        envelope.message()
    assert caught.value.reason == REASON_BAD_BODY
    assert dataclasses.replace(envelope, seq=2) != envelope


def test_topic_kinds_cover_registry() -> None:
    allowed = set().union(*TOPIC_KINDS.values())
    assert allowed == {message.KIND for message in sample_messages()}
    for request_kind, responses in PURCHASE_EXCHANGES.items():
        assert request_kind in allowed and responses <= allowed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutations_of_a_sealed_envelope_never_validate(data: st.DataObject) -> None:
    original = sealed_listing()
    position = data.draw(st.integers(0, len(original) - 1))
    operation = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
    if operation == "flip":
        bit = data.draw(st.integers(0, 7))
        mutated = bytearray(original)
        mutated[position] ^= 1 << bit
    elif operation == "set":
        mutated = bytearray(original)
        mutated[position] = data.draw(st.integers(0, 255).filter(lambda b: b != original[position]))
    elif operation == "insert":
        mutated = bytearray(original)
        mutated[position:position] = data.draw(st.binary(min_size=1, max_size=8))
    elif operation == "delete":
        size = data.draw(st.integers(1, 8))
        mutated = bytearray(original[:position] + original[position + size :])
    else:
        mutated = bytearray(original[:position])
    with pytest.raises(InvalidEnvelope) as caught:
        open_envelope(bytes(mutated))
    assert caught.value.reason in REJECTION_REASONS


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_rejected_cleanly(data: bytes) -> None:
    with pytest.raises(InvalidEnvelope):
        open_envelope(data)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**64), 2**64 - 1)
        | st.binary(max_size=70)
        | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=12), children, max_size=4)
        ),
        max_leaves=10,
    ),
    st.sampled_from(["kind", "version", "sender", "seq", "issued_at_ms", "body", "signature"]),
)
def test_structured_garbage_in_any_field_is_rejected(value: Any, key: str) -> None:
    fields = decode(sealed_listing())
    assume(encode(value) != encode(fields[key]))
    fields[key] = value
    with pytest.raises(InvalidEnvelope):
        open_envelope(encode(fields))


def test_envelope_is_frozen() -> None:
    envelope = open_envelope(sealed_listing())
    assert isinstance(envelope, Envelope)
    with pytest.raises(dataclasses.FrozenInstanceError):
        envelope.seq = 1  # type: ignore[misc]
