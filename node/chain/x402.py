"""x402 ``exact`` EVM compatibility: our payment terms and payloads in x402's v2 shape.

A purchase's payment requirements are x402 PaymentRequirements, and the buyer's
authorization is x402's EIP-3009 payload, so an x402 client can pay a crystalmesh
seller and an x402 facilitator can settle a crystalmesh buyer's authorization.
"""

from __future__ import annotations

from typing import Any

from eth_utils import to_checksum_address

from node.chain.authorization import Authorization
from node.chain.contracts import TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION

SCHEME_EXACT = "exact"


def network_id(chain_id: int) -> str:
    """CAIP-2 network id, e.g. ``eip155:84532`` for Base Sepolia."""
    return f"eip155:{chain_id}"


def payment_requirements(*, chain_id: int, token_address: str, pay_to: str, price_micro: int,
                         max_timeout_s: int = 300) -> dict[str, Any]:
    """x402 v2 PaymentRequirements (JSON field names) for one purchase."""
    return {
        "scheme": SCHEME_EXACT,
        "network": network_id(chain_id),
        "asset": to_checksum_address(token_address),
        "amount": str(int(price_micro)),
        "payTo": to_checksum_address(pay_to),
        "maxTimeoutSeconds": int(max_timeout_s),
        "extra": {"name": TOKEN_DOMAIN_NAME, "version": TOKEN_DOMAIN_VERSION},
    }


def payment_payload(authorization: Authorization, requirements: dict[str, Any]) -> dict[str, Any]:
    """x402 v2 PaymentPayload (JSON field names) carrying ``authorization``."""
    return {"x402Version": 2, "payload": authorization.to_x402_payload(), "accepted": requirements}


def authorization_from_payment(payload: dict[str, Any]) -> Authorization:
    """The EIP-3009 authorization inside an x402 v2 PaymentPayload (or its inner payload)."""
    inner = payload.get("payload", payload)
    return Authorization.from_x402_payload(inner)
