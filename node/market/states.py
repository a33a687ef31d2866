"""The states of a sale (seller side) and of a purchase (buyer side), written once.

Both are stored as their string values in the ``sales`` and ``purchases`` tables
(``node.market.schema``) and shown as such in the API and the CLI: a ``StrEnum``
member is its value, so rows written before this module existed read back the same.

Sale: ``authorized`` (recorded before settling) → ``settled`` → ``delivered``, or
``rejected`` / ``failed``; a voucher sale: ``vouched`` (the voucher recorded) → ``delivered``.

Purchase: ``authorized`` (recorded before the authorization leaves the node) →
``paid`` → ``completed``; ``pending`` (sent, outcome unknown: resumed by ``buy``
again); ``paid_undelivered`` (money moved, skill not yet received: redeliver);
``delivered_not_ingested`` (received, refused by the trust gate or not stored);
``quarantined`` (received, and the scanner or a network warning found it poisoned: kept
aside, out of memory and out of search, until the operator releases it);
or ``refused`` / ``failed`` / ``tampered``.
"""

from __future__ import annotations

from enum import StrEnum


class SaleState(StrEnum):
    AUTHORIZED = "authorized"
    # A voucher sale: the voucher is recorded (claimable), the skill may not be delivered yet.
    VOUCHED = "vouched"
    SETTLED = "settled"
    DELIVERED = "delivered"
    REJECTED = "rejected"
    FAILED = "failed"


class PurchaseState(StrEnum):
    AUTHORIZED = "authorized"
    PENDING = "pending"
    PAID = "paid"
    COMPLETED = "completed"
    PAID_UNDELIVERED = "paid_undelivered"
    DELIVERED_NOT_INGESTED = "delivered_not_ingested"
    REFUSED = "refused"
    FAILED = "failed"
    TAMPERED = "tampered"
    QUARANTINED = "quarantined"


# Sales whose money has arrived; purchases whose money has left (economics, unique buyers).
SALE_SETTLED_STATES = (SaleState.SETTLED, SaleState.DELIVERED, SaleState.VOUCHED)
PURCHASE_PAID_STATES = (PurchaseState.PAID, PurchaseState.COMPLETED, PurchaseState.PAID_UNDELIVERED,
                        PurchaseState.DELIVERED_NOT_INGESTED, PurchaseState.TAMPERED,
                        PurchaseState.QUARANTINED)


class ChannelStatus(StrEnum):
    """A payment channel as either side sees it (``buyer_channels`` / ``seller_channels``).

    ``open``: vouchers are paid and taken. ``withdrawing``: the payer asked the contract for
    its deposit back (the seller takes no more vouchers and claims at once). ``refunding``: the
    buyer asked the seller for a cooperative refund. ``closed``: refunded or withdrawn.
    """

    OPEN = "open"
    WITHDRAWING = "withdrawing"
    REFUNDING = "refunding"
    CLOSED = "closed"


class ClaimState(StrEnum):
    """A claim transaction (``channel_claims``): journaled ``submitted`` before it is
    broadcast, then ``mined`` or ``failed`` as the chain says."""

    SUBMITTED = "submitted"
    MINED = "mined"
    FAILED = "failed"
