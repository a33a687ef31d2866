"""Between the chain's ``Authorization`` and the purchase protocol's message form.

Both sides already speak the same plain-value map (``Authorization.to_wire`` and
``TransferAuthorization``'s body use the same keys); this only adds or strips the
signature, which the message carries beside the authorization.
"""

from __future__ import annotations

import json

from node.chain import Authorization
from protocol.messages import PaidPurchaseRequest, PaymentAuthorization
from protocol.purchase import TransferAuthorization


def payment_message(request_id: str, listing_id: str, authorization: Authorization) -> PaymentAuthorization:
    body = authorization.to_wire()
    signature = body.pop("signature")
    return PaymentAuthorization(
        request_id=request_id,
        listing_id=listing_id,
        authorization=TransferAuthorization.from_body(body),
        signature=signature,
    )


def paid_request(request_id: str, listing_id: str,
                 authorization: Authorization) -> PaidPurchaseRequest:
    """The one-round-trip request: the purchase and its payment in one message."""
    payment = payment_message(request_id, listing_id, authorization)
    return PaidPurchaseRequest(request_id=request_id, listing_id=listing_id,
                               authorization=payment.authorization, signature=payment.signature)


def authorization_of(message: PaymentAuthorization | PaidPurchaseRequest) -> Authorization:
    """Raises ``PaymentRejected("malformed", ...)`` for an unusable authorization."""
    return Authorization.from_wire(message.authorization.to_body() | {"signature": message.signature})


def authorization_json(authorization: Authorization) -> str:
    """The signed authorization as the purchase ledger stores it (to resend it unchanged)."""
    wire = authorization.to_wire()
    return json.dumps({key: ("0x" + value.hex() if isinstance(value, bytes) else value)
                       for key, value in wire.items()})


def authorization_from_json(text: str) -> Authorization:
    wire = json.loads(text)
    for key in ("nonce", "signature"):
        wire[key] = bytes.fromhex(wire[key][2:])
    return Authorization.from_wire(wire)
