"""EIP-3009 ``TransferWithAuthorization`` as EIP-712 typed data.

The buyer signs this structure with its wallet key (secp256k1); the seller
submits it to the token's ``transferWithAuthorization(from, to, value,
validAfter, validBefore, nonce, v, r, s)``. The dict returned by
:func:`transfer_with_authorization_typed_data` is the "full message" format
accepted by ``eth_account.messages.encode_typed_data(full_message=...)``.

The domain is USDC's: name "USDC", version "2" (Base and Base Sepolia USDC,
and the devnet token, which must be deployed with the same name and version
or signatures will not verify on chain).
"""

from __future__ import annotations

from typing import Any

from protocol.purchase import TransferAuthorization

__all__ = [
    "EIP712_DOMAIN_TYPE",
    "EIP712_DOMAIN_TYPEHASH",
    "TRANSFER_WITH_AUTHORIZATION_TYPE",
    "TRANSFER_WITH_AUTHORIZATION_TYPEHASH",
    "USDC_DOMAIN_NAME",
    "USDC_DOMAIN_VERSION",
    "authorization_typed_data",
    "transfer_with_authorization_typed_data",
]

USDC_DOMAIN_NAME = "USDC"
USDC_DOMAIN_VERSION = "2"

EIP712_DOMAIN_TYPE = (
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
TRANSFER_WITH_AUTHORIZATION_TYPE = (
    "TransferWithAuthorization(address from,address to,uint256 value,"
    "uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)
# keccak256 of the type strings above (the contract's constants).
EIP712_DOMAIN_TYPEHASH = bytes.fromhex(
    "8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f"
)
TRANSFER_WITH_AUTHORIZATION_TYPEHASH = bytes.fromhex(
    "7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
)


def transfer_with_authorization_typed_data(
    chain_id: int,
    token_address: str,
    from_: str,
    to: str,
    value: int,
    valid_after: int,
    valid_before: int,
    nonce: bytes,
    *,
    domain_name: str = USDC_DOMAIN_NAME,
    domain_version: str = USDC_DOMAIN_VERSION,
) -> dict[str, Any]:
    """EIP-712 typed data for one transfer of ``value`` micro-USDC from ``from_`` to ``to``.

    ``valid_after`` / ``valid_before`` are unix seconds (exclusive bounds on the
    block timestamp); ``nonce`` is 32 random bytes, unique per authorization.
    """
    if not isinstance(nonce, bytes) or len(nonce) != 32:
        raise ValueError("nonce must be exactly 32 bytes")
    for name, number in (
        ("chain_id", chain_id),
        ("value", value),
        ("valid_after", valid_after),
        ("valid_before", valid_before),
    ):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative int")
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "TransferWithAuthorization": [
                {"name": "from", "type": "address"},
                {"name": "to", "type": "address"},
                {"name": "value", "type": "uint256"},
                {"name": "validAfter", "type": "uint256"},
                {"name": "validBefore", "type": "uint256"},
                {"name": "nonce", "type": "bytes32"},
            ],
        },
        "primaryType": "TransferWithAuthorization",
        "domain": {
            "name": domain_name,
            "version": domain_version,
            "chainId": chain_id,
            "verifyingContract": token_address,
        },
        "message": {
            "from": from_,
            "to": to,
            "value": value,
            "validAfter": valid_after,
            "validBefore": valid_before,
            "nonce": nonce,
        },
    }


def authorization_typed_data(
    authorization: TransferAuthorization, chain_id: int, token_address: str
) -> dict[str, Any]:
    """Typed data for the ``authorization`` carried by a PaymentAuthorization message."""
    return transfer_with_authorization_typed_data(
        chain_id,
        token_address,
        authorization.from_,
        authorization.to,
        authorization.value,
        authorization.valid_after,
        authorization.valid_before,
        authorization.nonce,
    )
