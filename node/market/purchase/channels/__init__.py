"""Payment channels: x402 ``batch-settlement`` vouchers between buyer and seller.

``terms`` converts between the wire and the x402 SDK (which does all the cryptography),
``ledger`` is the durable record on both sides, ``sale`` / ``purchase`` are the seller's and
the buyer's halves of a voucher purchase, ``claims`` turns recorded vouchers into money,
``chain`` is the one interface to the chain's channel facade.

Rule: outside this package, import only the names below (``node/face.py``; enforced by
``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.purchase.channels.chain import ChainOutcome as ChainOutcome
    from node.market.purchase.channels.chain import ChannelChain as ChannelChain
    from node.market.purchase.channels.chain import ClaimEntry as ClaimEntry
    from node.market.purchase.channels.chain import FacadeChannels as FacadeChannels
    from node.market.purchase.channels.chain import OnChainChannel as OnChainChannel
    from node.market.purchase.channels.claims import Claimer as Claimer
    from node.market.purchase.channels.claims import claim_bound as claim_bound
    from node.market.purchase.channels.claims import claim_due as claim_due
    from node.market.purchase.channels.ledger import BuyerChannel as BuyerChannel
    from node.market.purchase.channels.ledger import ChannelLedger as ChannelLedger
    from node.market.purchase.channels.ledger import SellerChannel as SellerChannel
    from node.market.purchase.channels.purchase import ExactOnly as ExactOnly
    from node.market.purchase.channels.purchase import VoucherBuying as VoucherBuying
    from node.market.purchase.channels.sale import VoucherSelling as VoucherSelling
    from node.market.purchase.channels.terms import SCHEME_EXACT as SCHEME_EXACT
    from node.market.purchase.channels.terms import SCHEME_VOUCHER as SCHEME_VOUCHER

__getattr__ = face(__name__)
