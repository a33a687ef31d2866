"""A bought skill becomes a crystal: frozen, private, permanent, origin the seller's peer,
with an ``imported`` provenance node naming the listing and the payment.

It counts as verified only if the endorsement is by a management key this node trusts
(checked again here, at purchase, not taken from the listing book).
"""

from __future__ import annotations

from collections.abc import Collection

from node.crystals import (
    AccessScope,
    Crystal,
    Governance,
    Lifecycle,
    LifespanPolicy,
    Origin,
    SemanticType,
    Source,
    now_ms,
    provenance,
)
from node.market.book import StoredListing
from protocol.channel import VoucherDelivery
from protocol.messages import Delivery, verify_endorsement


def verified_by(stored: StoredListing, management_keys: Collection[str]) -> str | None:
    """The trusted management key that endorsed this listing, or None."""
    management = {key.lower() for key in management_keys}
    endorser = stored.endorsed_by if (stored.endorsed_by or "").lower() in management else None
    endorsement = stored.listing.endorsement
    if endorsement is not None and not (
        endorsement.management_key.hex() in management and verify_endorsement(stored.listing)
    ):
        return None
    return endorser


def imported_skill(stored: StoredListing, delivery: Delivery | VoucherDelivery,
                   management_keys: Collection[str]) -> Crystal:
    """The crystal to store for a verified delivery of ``stored`` (a voucher delivery's
    provenance names its channel and total instead of a transaction)."""
    payment: dict[str, object] = ({"tx_hash": delivery.tx_hash} if isinstance(delivery, Delivery) else
               {"channel_id": "0x" + delivery.channel_id.hex(),
                "voucher_total": delivery.charged_total})
    return _bought_crystal(delivery.payload, stored.seller_key.hex(), stored,
                           verified_by(stored, management_keys),
                           {"listing_id": stored.listing.listing_id} | payment)


def released_skill(payload: str, seller_hex: str, listing_id: str, tx_hash: str | None,
                   stored: StoredListing | None) -> Crystal:
    """The crystal for a quarantined skill the operator released (its listing may be gone:
    a network warning drops it from the book); never verified, whatever endorsed it."""
    return _bought_crystal(payload, seller_hex, stored, None,
                           {"listing_id": listing_id, "tx_hash": tx_hash, "released_from_quarantine": True})


def _bought_crystal(payload: str, seller_hex: str, stored: StoredListing | None, endorser: str | None,
                    metadata: dict[str, object]) -> Crystal:
    listing = stored.listing if stored else None
    crystal = Crystal(
        text=payload,
        source=Source.SKILLS,
        semantic_type=SemanticType.SKILL,
        origin=Origin.PEER,
        lifecycle=Lifecycle.FROZEN,
        governance=Governance(
            access_scope=AccessScope.PRIVATE,
            lifespan_policy=LifespanPolicy.PERMANENT,
            provenance_chain=[provenance.peer_actor(seller_hex)],
            peer_origin=seller_hex,
        ),
        stable_skill_id=listing.stable_skill_id if listing else None,
        skill_version=listing.skill_version if listing else 1,
        skill_tags=list(listing.tags) if listing else [],
        skill_category=listing.category if listing else None,
        is_verified=endorser is not None,
        verified_by=endorser,
    )
    crystal.provenance_dag.append(provenance.imported_node(crystal.id, seller_hex, now_ms(), metadata=metadata))
    return crystal
