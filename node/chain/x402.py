"""x402 ``exact`` EVM compatibility: our payment terms and payloads in x402's v2 shape.

A purchase's payment requirements are x402 PaymentRequirements, and the buyer's
authorization is x402's EIP-3009 payload, so an x402 client can pay a crystalmesh
seller and an x402 facilitator can settle a crystalmesh buyer's authorization.
Over HTTP (:mod:`node.chain.x402_server`) the same terms travel in x402's headers:
``PAYMENT-REQUIRED`` (402 answer), ``PAYMENT-SIGNATURE`` (the paid retry) and
``PAYMENT-RESPONSE`` (the settlement), each base64 of JSON.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from eth_utils import to_checksum_address

from node.chain.authorization import Authorization
from node.chain.contracts import TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION
from node.chain.errors import PaymentRejected
from protocol.purchase import PaymentRequirements

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


# --- x402 over HTTP (transport "http", x402 v2) ----------------------------------------------
X402_VERSION = 2
PAYMENT_REQUIRED_HEADER = "PAYMENT-REQUIRED"
PAYMENT_SIGNATURE_HEADER = "PAYMENT-SIGNATURE"
PAYMENT_RESPONSE_HEADER = "PAYMENT-RESPONSE"
LEGACY_PAYMENT_HEADER = "X-PAYMENT"
# A real payment header is ~1.3 KiB of base64; anything far past that is not one.
MAX_PAYMENT_HEADER_CHARS = 8 * 1024
_MAX_JSON_DEPTH = 8


def encode_header(value: dict[str, Any]) -> str:
    """x402 header encoding: base64 of compact JSON."""
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode("ascii")


def payment_required(requirements: dict[str, Any], *, resource_url: str, description: str,
                     mime_type: str = "application/json", error: str | None = None) -> dict[str, Any]:
    """x402 v2 PaymentRequired: the body (and base64 header) of an HTTP 402 answer."""
    body: dict[str, Any] = {
        "x402Version": X402_VERSION,
        "resource": {"url": resource_url, "description": description, "mimeType": mime_type},
        "accepts": [requirements],
    }
    if error:
        body["error"] = error
    return body


def settle_response(*, tx_hash: str, chain_id: int, payer: str, amount_micro: int) -> dict[str, Any]:
    """x402 v2 SettleResponse, sent base64-encoded in the PAYMENT-RESPONSE header."""
    return {"success": True, "transaction": tx_hash, "network": network_id(chain_id),
            "payer": to_checksum_address(payer), "amount": str(int(amount_micro))}


def _depth(value: Any, level: int = 0) -> int:
    if level > _MAX_JSON_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(item, level + 1) for item in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(item, level + 1) for item in value), default=level + 1)
    return level


def decode_payment_header(value: str) -> dict[str, Any]:
    """The x402 v2 PaymentPayload in a PAYMENT-SIGNATURE header, checked for shape only.

    Raises :class:`PaymentRejected` (``malformed``) for anything that is not strict
    base64 of a small JSON object with ``x402Version`` 2, a ``payload`` and an
    ``accepted`` object. Nothing here trusts the content: the authorization is
    verified by the settlement engine, ``accepted`` by :func:`check_accepted`.
    """
    if len(value) > MAX_PAYMENT_HEADER_CHARS:
        raise PaymentRejected("malformed", f"payment header longer than {MAX_PAYMENT_HEADER_CHARS}")
    try:
        raw = base64.b64decode(value.strip().encode("ascii"), validate=True)
        decoded = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeError, RecursionError) as error:
        raise PaymentRejected("malformed", "payment header is not base64 JSON") from error
    if not isinstance(decoded, dict) or _depth(decoded) > _MAX_JSON_DEPTH:
        raise PaymentRejected("malformed", "payment header is not a small JSON object")
    if decoded.get("x402Version") != X402_VERSION:
        raise PaymentRejected("malformed", f"x402Version must be {X402_VERSION}")
    if not isinstance(decoded.get("payload"), dict) or not isinstance(decoded.get("accepted"), dict):
        raise PaymentRejected("malformed", "payment header lacks payload/accepted objects")
    return decoded


def check_accepted(accepted: dict[str, Any], offered: dict[str, Any]) -> None:
    """The buyer's ``accepted`` must be the terms we offered: same scheme, network,
    asset, payee and amount (the authorization itself is checked against ours too)."""
    if accepted.get("scheme") != offered["scheme"]:
        raise PaymentRejected("wrong_scheme", f"scheme must be {offered['scheme']}")
    if accepted.get("network") != offered["network"]:
        raise PaymentRejected("wrong_network", f"network must be {offered['network']}")
    if str(accepted.get("asset", "")).lower() != offered["asset"].lower():
        raise PaymentRejected("wrong_asset", f"asset must be {offered['asset']}")
    if str(accepted.get("payTo", "")).lower() != offered["payTo"].lower():
        raise PaymentRejected("wrong_payee", f"payTo must be {offered['payTo']}")
    if accepted.get("amount") != offered["amount"]:
        raise PaymentRejected("wrong_amount", f"amount must be {offered['amount']}")


def requirements_from_terms(terms: PaymentRequirements, now_s: int) -> dict[str, Any]:
    """The x402 v2 PaymentRequirements equal to a libp2p ``payment_requirements`` message."""
    requirements = payment_requirements(
        chain_id=terms.chain_id, token_address=terms.asset, pay_to=terms.pay_to,
        price_micro=terms.price_micro_usdc, max_timeout_s=max(0, terms.valid_before_s - now_s))
    requirements["extra"] = {"name": terms.extra.name, "version": terms.extra.version}
    return requirements
