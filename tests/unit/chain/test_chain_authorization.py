"""EIP-3009 authorizations: signing, recovery and the off-chain acceptance checks."""

from __future__ import annotations

import dataclasses

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from node.chain.authorization import (
    SECP256K1_N,
    Authorization,
    check_authorization,
    domain_separator,
    sign_authorization,
)
from node.chain.errors import PaymentRejected
from node.chain.x402 import authorization_from_payment, payment_payload, payment_requirements
from node.config import BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC

NOW = 1_700_000_000
BUYER = Account.from_key("0x" + "11" * 32)
SELLER = Account.from_key("0x" + "22" * 32).address


def _sign(**overrides: object) -> Authorization:
    kwargs: dict[str, object] = dict(chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=BASE_SEPOLIA_USDC,
                                     to=SELLER, value_micro=10_000, now_s=NOW)
    kwargs.update(overrides)
    return sign_authorization(BUYER, **kwargs)  # type: ignore[arg-type]


def _check(authorization: Authorization, **overrides: object) -> None:
    kwargs: dict[str, object] = dict(chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=BASE_SEPOLIA_USDC,
                                     pay_to=SELLER, price_micro=10_000, now_s=NOW)
    kwargs.update(overrides)
    check_authorization(authorization, **kwargs)  # type: ignore[arg-type]


def test_digest_matches_eth_account_typed_data() -> None:
    """Our hand-rolled EIP-712 hashing equals eth-account's generic implementation."""
    authorization = _sign()
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
            ],
            "TransferWithAuthorization": [
                {"name": "from", "type": "address"}, {"name": "to", "type": "address"},
                {"name": "value", "type": "uint256"}, {"name": "validAfter", "type": "uint256"},
                {"name": "validBefore", "type": "uint256"}, {"name": "nonce", "type": "bytes32"},
            ],
        },
        "primaryType": "TransferWithAuthorization",
        "domain": {"name": "USDC", "version": "2", "chainId": BASE_SEPOLIA_CHAIN_ID,
                   "verifyingContract": BASE_SEPOLIA_USDC},
        "message": {"from": authorization.from_address, "to": authorization.to, "value": 10_000,
                    "validAfter": 0, "validBefore": authorization.valid_before_s,
                    "nonce": authorization.nonce},
    }
    signed = Account.sign_message(encode_typed_data(full_message=typed), BUYER.key)
    assert authorization.signature == signed.signature
    assert len(domain_separator(BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC)) == 32


def test_valid_authorization_passes_and_nonces_are_random() -> None:
    first, second = _sign(), _sign()
    _check(first)
    assert first.recover_signer(BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC) == BUYER.address
    assert first.nonce != second.nonce and len(first.nonce) == 32


@pytest.mark.parametrize(
    ("authorization_overrides", "check_overrides", "reason"),
    [
        ({}, {"pay_to": BUYER.address}, "wrong_payee"),
        ({}, {"price_micro": 9_999}, "wrong_amount"),
        ({"valid_before_s": NOW - 1}, {}, "expired"),
        ({"valid_before_s": NOW + 3}, {}, "expired"),  # too close to expiry to be mined
        ({"valid_after_s": NOW + 60}, {}, "not_yet_valid"),
        ({}, {"chain_id": 8453}, "bad_signature"),  # signed for another chain
        ({}, {"token_address": "0x" + "ab" * 20}, "bad_signature"),  # another token
    ],
)
def test_rejections(authorization_overrides: dict[str, object], check_overrides: dict[str, object],
                    reason: str) -> None:
    with pytest.raises(PaymentRejected) as caught:
        _check(_sign(**authorization_overrides), **check_overrides)
    assert caught.value.reason == reason


def test_tampered_fields_and_signature_are_rejected() -> None:
    authorization = _sign()
    tampered_value = dataclasses.replace(authorization, value_micro=1_000_000)
    with pytest.raises(PaymentRejected) as caught:
        _check(tampered_value, price_micro=1_000_000)
    assert caught.value.reason == "bad_signature"
    flipped = bytearray(authorization.signature)
    flipped[10] ^= 0x01
    with pytest.raises(PaymentRejected) as caught:
        _check(dataclasses.replace(authorization, signature=bytes(flipped)))
    assert caught.value.reason == "bad_signature"


def test_high_s_signature_is_rejected_like_the_token() -> None:
    authorization = _sign()
    s = int.from_bytes(authorization.s, "big")
    malleable = authorization.r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - authorization.v])
    with pytest.raises(PaymentRejected) as caught:
        _check(dataclasses.replace(authorization, signature=malleable))
    assert caught.value.reason == "bad_signature"


def test_malformed_authorization() -> None:
    with pytest.raises(PaymentRejected) as caught:
        Authorization.from_wire({"from": "nope"})
    assert caught.value.reason == "malformed"
    with pytest.raises(PaymentRejected):
        dataclasses.replace(_sign(), nonce=b"short")


def test_wire_and_x402_round_trips() -> None:
    authorization = _sign()
    assert Authorization.from_wire(authorization.to_wire()) == authorization
    assert Authorization.from_x402_payload(authorization.to_x402_payload()) == authorization
    requirements = payment_requirements(chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=BASE_SEPOLIA_USDC,
                                        pay_to=SELLER, price_micro=10_000)
    assert authorization_from_payment(payment_payload(authorization, requirements)) == authorization
    assert requirements["extra"] == {"name": "USDC", "version": "2"}
    assert requirements["network"] == "eip155:84532" and requirements["amount"] == "10000"
