"""EIP-3009 typed data: signs and recovers with eth_account, matches the contract's hashing."""

from __future__ import annotations

import pytest
from eth_abi import encode as abi_encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak, to_checksum_address

from protocol.messages import PaymentAuthorization, TransferAuthorization
from protocol.payment import (
    EIP712_DOMAIN_TYPE,
    EIP712_DOMAIN_TYPEHASH,
    TRANSFER_WITH_AUTHORIZATION_TYPE,
    TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
    authorization_typed_data,
    transfer_with_authorization_typed_data,
)

BUYER = Account.from_key(b"\x07" * 32)
SELLER_ADDRESS = "0x" + "5e" * 20
TOKEN = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"  # Base Sepolia USDC
CHAIN_ID = 84532
NONCE = bytes(range(32))


def typed_data() -> dict:
    return transfer_with_authorization_typed_data(
        CHAIN_ID, TOKEN, BUYER.address, SELLER_ADDRESS, 10_000, 0, 1_700_000_600, NONCE
    )


def test_type_hashes_are_keccak_of_type_strings() -> None:
    assert keccak(text=EIP712_DOMAIN_TYPE) == EIP712_DOMAIN_TYPEHASH
    assert keccak(text=TRANSFER_WITH_AUTHORIZATION_TYPE) == TRANSFER_WITH_AUTHORIZATION_TYPEHASH


def test_sign_and_recover_with_eth_account() -> None:
    signed = Account.sign_message(encode_typed_data(full_message=typed_data()), BUYER.key)
    assert len(signed.signature) == 65
    recovered = Account.recover_message(
        encode_typed_data(full_message=typed_data()), signature=signed.signature
    )
    assert recovered == BUYER.address


def test_digest_matches_the_contract_computation() -> None:
    """What the token contract hashes: 0x1901 || domainSeparator || structHash."""
    domain_separator = keccak(
        abi_encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [EIP712_DOMAIN_TYPEHASH, keccak(text="USDC"), keccak(text="2"), CHAIN_ID, TOKEN],
        )
    )
    struct_hash = keccak(
        abi_encode(
            ["bytes32", "address", "address", "uint256", "uint256", "uint256", "bytes32"],
            [
                TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
                BUYER.address,
                SELLER_ADDRESS,
                10_000,
                0,
                1_700_000_600,
                NONCE,
            ],
        )
    )
    digest = keccak(b"\x19\x01" + domain_separator + struct_hash)
    signed = Account.sign_message(encode_typed_data(full_message=typed_data()), BUYER.key)
    assert signed.message_hash == digest
    assert Account._recover_hash(digest, signature=signed.signature) == BUYER.address


def test_authorization_message_round_trip_to_typed_data() -> None:
    authorization = TransferAuthorization(
        from_=BUYER.address.lower(),
        to=SELLER_ADDRESS,
        value=10_000,
        valid_after=0,
        valid_before=1_700_000_600,
        nonce=NONCE,
    )
    data = authorization_typed_data(authorization, CHAIN_ID, TOKEN)
    signed = Account.sign_message(encode_typed_data(full_message=data), BUYER.key)
    message = PaymentAuthorization("ab" * 16, "cd" * 32, authorization, signed.signature)
    received = PaymentAuthorization.from_body(message.to_body())
    again = authorization_typed_data(received.authorization, CHAIN_ID, TOKEN)
    recovered = Account.recover_message(
        encode_typed_data(full_message=again), signature=received.signature
    )
    assert recovered == to_checksum_address(authorization.from_)


def test_wrong_domain_does_not_recover_the_signer() -> None:
    signed = Account.sign_message(encode_typed_data(full_message=typed_data()), BUYER.key)
    other_chain = transfer_with_authorization_typed_data(
        1, TOKEN, BUYER.address, SELLER_ADDRESS, 10_000, 0, 1_700_000_600, NONCE
    )
    recovered = Account.recover_message(
        encode_typed_data(full_message=other_chain), signature=signed.signature
    )
    assert recovered != BUYER.address


@pytest.mark.parametrize(
    "changes",
    [{"nonce": b"\x00" * 31}, {"value": -1}, {"chain_id": True}, {"valid_before": 1.5}],
)
def test_builder_rejects_bad_arguments(changes: dict) -> None:
    arguments = {
        "chain_id": CHAIN_ID,
        "token_address": TOKEN,
        "from_": BUYER.address,
        "to": SELLER_ADDRESS,
        "value": 1,
        "valid_after": 0,
        "valid_before": 10,
        "nonce": NONCE,
        **changes,
    }
    with pytest.raises(ValueError):
        transfer_with_authorization_typed_data(**arguments)
