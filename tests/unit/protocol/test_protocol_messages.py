"""Message schemas: every field rejects what the spec forbids."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from protocol.identity import Identity
from protocol.messages import (
    MAX_SKILL_PAYLOAD_BYTES,
    MESSAGE_TYPES,
    Delivery,
    ErrorReply,
    InvalidMessage,
    Message,
    PaymentAuthorization,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
    SkillListing,
    TransferAuthorization,
    TrustEntry,
    TrustReport,
    WeatherAlert,
    content_hash,
    endorse,
    listing_signing_bytes,
    new_request_id,
    parse_body,
    verify_endorsement,
)
from protocol.schema import attribute_name
from tests.fixtures.messages import (
    ADDRESS_B,
    HASH,
    MANAGEMENT,
    REQUEST_ID,
    SELLER,
    T0_MS,
    TX,
    sample_authorization,
    sample_listing,
    sample_messages,
    sample_weather,
)


def test_registry_covers_every_message() -> None:
    kinds = {type(message) for message in sample_messages()}
    assert kinds == set(MESSAGE_TYPES.values())
    for (kind, version), message_type in MESSAGE_TYPES.items():
        assert (kind, version) == (message_type.KIND, message_type.VERSION)


def test_fields_table_matches_dataclass_fields() -> None:
    for message_type in MESSAGE_TYPES.values():
        names = [field.name for field in dataclasses.fields(message_type)]
        assert names == [attribute_name(key) for key in message_type.FIELDS]


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: m.KIND)
def test_body_round_trip(message: Message) -> None:
    body = message.to_body()
    assert type(message).from_body(body) == message
    assert parse_body(message.KIND, message.VERSION, body) == message


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: m.KIND)
def test_exact_key_set(message: Message) -> None:
    body = message.to_body()
    with pytest.raises(InvalidMessage):
        type(message).from_body({**body, "extra": 1})
    for key in body:
        partial = {k: v for k, v in body.items() if k != key}
        with pytest.raises(InvalidMessage):
            type(message).from_body(partial)
    with pytest.raises(InvalidMessage):
        type(message).from_body([body])


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: m.KIND)
def test_every_field_rejects_a_wrong_type(message: Message) -> None:
    body = message.to_body()
    for key, value in body.items():
        wrong = 1.5 if not isinstance(value, float) else "x"
        with pytest.raises(InvalidMessage):
            type(message).from_body({**body, key: wrong})
        if isinstance(value, int) and not isinstance(value, bool):
            with pytest.raises(InvalidMessage):
                type(message).from_body({**body, key: True})


LISTING_BAD_FIELDS: list[tuple[str, Any]] = [
    ("listing_id", "AB" * 32),
    ("listing_id", "ab" * 31),
    ("stable_skill_id", ""),
    ("stable_skill_id", "s" * 129),
    ("skill_version", 0),
    ("name", ""),
    ("name", "n" * 129),
    ("description", "d" * 4097),
    ("tags", ["t"] * 17),
    ("tags", ["dup", "dup"]),
    ("tags", [""]),
    ("tags", ["t" * 33]),
    ("tags", "logs"),
    ("category", ""),
    ("content_hash", "xyz"),
    ("size_bytes", -1),
    ("size_bytes", MAX_SKILL_PAYLOAD_BYTES + 1),
    ("price_micro_usdc", -1),
    ("price_micro_usdc", 2**64),
    ("pay_to", "0x" + "aa" * 19),
    ("pay_to", "aa" * 21),
    ("pay_to", "0x" + "gg" * 20),
    ("chain_id", 0),
    ("token_address", ""),
    ("executions", -1),
    ("successes", 11),
    ("reward_sum_ppm", 10_000_001),
    ("unique_buyers", -1),
    ("expires_at_ms", -1),
    ("previous_listing_id", "nope"),
    ("endorsement", {"management_key": b"\x00" * 32}),
    ("endorsement", {"management_key": b"\x00" * 31, "signature": b"\x00" * 64}),
    ("endorsement", b"\x00" * 96),
]


@pytest.mark.parametrize(("key", "value"), LISTING_BAD_FIELDS)
def test_listing_rejects(key: str, value: Any) -> None:
    body = sample_listing().to_body()
    with pytest.raises(InvalidMessage):
        SkillListing.from_body({**body, key: value})


def test_listing_rejects_previous_equal_to_self() -> None:
    listing = sample_listing()
    with pytest.raises(InvalidMessage):
        SkillListing.from_body({**listing.to_body(), "previous_listing_id": listing.listing_id})


def test_listing_id_bound_to_sender_and_expiry_after_issue() -> None:
    listing = sample_listing()
    listing.check_envelope(SELLER.public_key, T0_MS)
    with pytest.raises(InvalidMessage):
        listing.check_envelope(MANAGEMENT.public_key, T0_MS)
    with pytest.raises(InvalidMessage):
        listing.check_envelope(SELLER.public_key, listing.expires_at_ms)


def test_construction_validates_and_normalises() -> None:
    with pytest.raises(InvalidMessage):
        sample_listing(price_micro_usdc=-5)
    with pytest.raises(InvalidMessage):
        sample_listing(tags="logs")
    listing = sample_listing(tags=["a", "b"])
    assert listing.tags == ("a", "b")
    hash(listing)


def test_endorsement_sign_and_verify() -> None:
    listing = sample_listing()
    assert not verify_endorsement(listing)
    endorsed = endorse(listing, MANAGEMENT)
    assert endorsed.endorsement is not None
    assert endorsed.endorsement.management_key == MANAGEMENT.public_key
    assert verify_endorsement(endorsed)
    assert SkillListing.from_body(endorsed.to_body()) == endorsed
    assert listing_signing_bytes(listing) == listing_signing_bytes(endorsed)
    tampered = dataclasses.replace(endorsed, price_micro_usdc=1)
    assert not verify_endorsement(tampered)
    forged = dataclasses.replace(
        endorsed,
        endorsement=dataclasses.replace(endorsed.endorsement, management_key=SELLER.public_key),
    )
    assert not verify_endorsement(forged)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cortisol_level_ppm", -1),
        ("cortisol_level_ppm", 1_000_001),
        ("issued_at_ms", -1),
        ("expires_at_ms", T0_MS),
        ("expires_at_ms", T0_MS - 1),
        ("reason", "r" * 281),
        ("reason", None),
    ],
)
def test_weather_rejects(key: str, value: Any) -> None:
    body = sample_weather().to_body()
    with pytest.raises(InvalidMessage):
        WeatherAlert.from_body({**body, key: value})


def test_weather_issued_at_must_match_envelope() -> None:
    alert = sample_weather()
    alert.check_envelope(MANAGEMENT.public_key, T0_MS)
    with pytest.raises(InvalidMessage):
        alert.check_envelope(MANAGEMENT.public_key, T0_MS + 1)


@pytest.mark.parametrize(
    "row",
    [
        [[b"\x11" * 32, 600_000], [b"\x11" * 32, 400_000]],
        [[b"\x11" * 32, 900_000], [b"\x22" * 32, 900_000]],
        [[b"\x11" * 32, 1_000_001]],
        [[b"\x11" * 32, -1]],
        [[b"\x11" * 31, 1]],
        [[b"\x11" * 32]],
        [[b"\x11" * 32, 1, 2]],
        [{"peer": b"\x11" * 32, "weight_ppm": 1}],
        [[i.to_bytes(32, "big"), 1] for i in range(257)],
    ],
)
def test_trust_report_rejects(row: Any) -> None:
    with pytest.raises(InvalidMessage):
        TrustReport.from_body({"epoch": 1, "row": row})


def test_trust_report_accepts_rounding_and_rejects_self_entry() -> None:
    row = [[i.to_bytes(32, "big"), 333_334] for i in range(3)]  # sums to 1_000_002
    report = TrustReport.from_body({"epoch": 1, "row": row})
    assert report.row[0] == TrustEntry(bytes(32), 333_334)
    TrustReport.from_body({"epoch": 0, "row": []})
    with pytest.raises(InvalidMessage):
        report.check_envelope(bytes(32), T0_MS)


@pytest.mark.parametrize(
    ("message_type", "key", "value"),
    [
        (PurchaseRequest, "request_id", "short"),
        (PurchaseRequest, "request_id", "0123456789ABCDEF" * 2),
        (PurchaseRequest, "buyer_address", "0xnope"),
        (PaymentRequirements, "scheme", "upto"),
        (PaymentRequirements, "price_micro_usdc", -1),
        (PaymentRequirements, "valid_before_s", -1),
        (PaymentRequirements, "chain_id", 0),
        (PaymentAuthorization, "signature", b"\x1b" * 64),
        (PaymentAuthorization, "authorization", {}),
        (Delivery, "payload", "tampered"),
        (Delivery, "tx_hash", "0x" + "cd" * 31),
        (Delivery, "tx_hash", "0x" + "CD" * 32),
        (Receipt, "ok", 1),
        (ErrorReply, "code", "teapot"),
        (ErrorReply, "message", "m" * 281),
    ],
)
def test_purchase_messages_reject(message_type: type[Message], key: str, value: Any) -> None:
    (message,) = [m for m in sample_messages() if isinstance(m, message_type)]
    with pytest.raises(InvalidMessage):
        message_type.from_body({**message.to_body(), key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("nonce", b"\x33" * 31),
        ("value", -1),
        ("valid_before", 0),
        ("from", "0x" + "aa" * 19),
    ],
)
def test_transfer_authorization_rejects(key: str, value: Any) -> None:
    body = sample_authorization().to_body()
    assert set(body) == {"from", "to", "value", "valid_after", "valid_before", "nonce"}
    with pytest.raises(InvalidMessage):
        TransferAuthorization.from_body({**body, key: value})


def test_delivery_payload_size_limit() -> None:
    big = "é" * (MAX_SKILL_PAYLOAD_BYTES // 2 + 1)  # fits in chars, not in UTF-8 bytes
    with pytest.raises(InvalidMessage):
        Delivery(REQUEST_ID, HASH, big, content_hash(big), TX)
    fits = "x" * MAX_SKILL_PAYLOAD_BYTES
    Delivery(REQUEST_ID, HASH, fits, content_hash(fits), TX)


def test_new_request_id_is_valid() -> None:
    request_id = new_request_id()
    assert PurchaseRequest(request_id, HASH, ADDRESS_B).request_id == request_id
    assert new_request_id() != request_id


def test_listing_integers_fit_a_signed_64_bit_store_and_lifetime_is_bounded() -> None:
    """Issue 11 row 8: a price of 2**64-1 validated and then overflowed SQLite on every node."""
    from protocol.envelope import InvalidEnvelope, open_envelope, seal
    from protocol.schema import MAX_LISTING_LIFETIME_MS, MAX_PRICE_MICRO_USDC, InvalidMessage
    from tests.support.net import make_listing

    seller = Identity.generate()
    now = 1_700_000_000_000
    for price in (2**64 - 1, 2**63, MAX_PRICE_MICRO_USDC + 1):
        body = make_listing(seller, now_ms=now).to_body() | {"price_micro_usdc": price}
        with pytest.raises((InvalidEnvelope, InvalidMessage)):
            seal(seller, "skill_listing", body, 1, now)
    ok = dataclasses.replace(make_listing(seller, now_ms=now), price_micro_usdc=MAX_PRICE_MICRO_USDC)
    assert open_envelope(seal(seller, ok.KIND, ok, 1, now)).message().price_micro_usdc == MAX_PRICE_MICRO_USDC
    forever = dataclasses.replace(ok, expires_at_ms=now + MAX_LISTING_LIFETIME_MS + 1)
    with pytest.raises(InvalidEnvelope):
        seal(seller, forever.KIND, forever, 2, now)
    with pytest.raises(InvalidEnvelope):
        seal(seller, ok.KIND, ok, 2**63, now)
