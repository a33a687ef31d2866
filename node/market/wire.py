"""Between the chain's ``Authorization`` and the purchase protocol's message form."""

from __future__ import annotations

from node.chain.authorization import Authorization
from protocol.messages import PaymentAuthorization
from protocol.purchase import TransferAuthorization


def payment_message(request_id: str, listing_id: str, authorization: Authorization) -> PaymentAuthorization:
    return PaymentAuthorization(
        request_id=request_id,
        listing_id=listing_id,
        authorization=TransferAuthorization(
            from_=authorization.from_address,
            to=authorization.to,
            value=authorization.value_micro,
            valid_after=authorization.valid_after_s,
            valid_before=authorization.valid_before_s,
            nonce=authorization.nonce,
        ),
        signature=authorization.signature,
    )


def authorization_of(message: PaymentAuthorization) -> Authorization:
    """Raises ``PaymentRejected("malformed", ...)`` for an unusable authorization."""
    transfer = message.authorization
    return Authorization(
        from_address=transfer.from_,
        to=transfer.to,
        value_micro=transfer.value,
        valid_after_s=transfer.valid_after,
        valid_before_s=transfer.valid_before,
        nonce=transfer.nonce,
        signature=message.signature,
    )
