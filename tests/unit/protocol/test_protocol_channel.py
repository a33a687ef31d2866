"""The voucher messages (protocol.channel) are strict: unknown or missing keys, wrong sizes,
out-of-range amounts and delays are refused before any handler sees them; a valid one
round-trips through canonical CBOR unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.channel import ChannelDeposit, ChannelTerms, VoucherPurchaseRequest
from protocol.codec import decode, encode
from protocol.schema import InvalidMessage
from tests.fixtures.messages import sample_voucher_request


def body() -> dict[str, Any]:
    return decode(encode(sample_voucher_request().to_body()))


def test_a_voucher_request_round_trips() -> None:
    request = sample_voucher_request()
    assert VoucherPurchaseRequest.from_body(decode(encode(request.to_body()))) == request
    assert VoucherPurchaseRequest.from_body(sample_voucher_request(deposit=False).to_body()).deposit is None


@pytest.mark.parametrize("mutate, reason", [
    (lambda b: b.update(extra=1), "unknown keys"),
    (lambda b: b.pop("signature"), "missing keys"),
    (lambda b: b["channel"].update(withdraw_delay_s=899), "withdraw_delay_s"),
    (lambda b: b["channel"].update(withdraw_delay_s=2_592_001), "withdraw_delay_s"),
    (lambda b: b["channel"].update(admin="0x" + "00" * 20), "unknown keys"),
    (lambda b: b.update(channel_id=b"\x44" * 31), "channel_id"),
    (lambda b: b.update(signature=b"\x1c" * 66), "signature"),
    (lambda b: b.update(max_claimable=0), "max_claimable"),
    (lambda b: b.update(max_claimable=2**96), "max_claimable"),
    (lambda b: b.update(max_claimable=True), "max_claimable"),
    (lambda b: b.update(price_micro_usdc=40_000), "below the price"),
    (lambda b: b["deposit"].update(value=0), "value"),
    (lambda b: b["deposit"].update(valid_before=0), "valid_before"),
    (lambda b: b["channel"].update(payer="0x" + "zz" * 20), "payer"),
])
def test_malformed_voucher_requests_are_refused(mutate: Any, reason: str) -> None:
    bad = body()
    mutate(bad)
    with pytest.raises(InvalidMessage, match=reason):
        VoucherPurchaseRequest.from_body(bad)


def test_records_refuse_bad_values_at_construction() -> None:
    with pytest.raises(InvalidMessage):
        ChannelTerms("0x" + "11" * 20, "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "22" * 20,
                     "0x" + "33" * 20, 60, b"\x00" * 32)
    with pytest.raises(InvalidMessage):
        ChannelDeposit(10, 5, 5, b"\x00" * 32, b"\x00" * 65)
