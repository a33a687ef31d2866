"""A purchase end to end: buyer, seller, terms, payment proof, reconciliation, x402.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.purchase.buyer import Buyer as Buyer
    from node.market.purchase.buyer import PurchaseRefused as PurchaseRefused
    from node.market.purchase.channels import ChainOutcome as ChainOutcome
    from node.market.purchase.channels import ChannelChain as ChannelChain
    from node.market.purchase.channels import ChannelLedger as ChannelLedger
    from node.market.purchase.channels import ClaimEntry as ClaimEntry
    from node.market.purchase.channels import Claimer as Claimer
    from node.market.purchase.channels import FacadeChannels as FacadeChannels
    from node.market.purchase.channels import OnChainChannel as OnChainChannel
    from node.market.purchase.reconcile import reconcile_settlements as reconcile_settlements
    from node.market.purchase.seller import Seller as Seller
    from node.market.purchase.x402_seller import serve_seller as serve_seller

__getattr__ = face(__name__)
