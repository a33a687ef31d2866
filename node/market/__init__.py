"""The skill market: the listing book, selling and purchases.

Wings: ``book`` (listings, lifecycle, bounties, the living market), ``selling`` (gates,
pricing, publishing, the catalogue) and ``purchase`` (buyer, seller, terms, payment
proof, reconciliation, x402). ``Market`` (``face``) is what the API calls; the ledger
and the schema are shared by all three wings.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.book.listings import ListingBook as ListingBook
    from node.market.desk import DeskParts as DeskParts
    from node.market.face import Market as Market
    from node.market.face import record_skill_run as record_skill_run
    from node.market.intake import SkillsIntake as SkillsIntake
    from node.market.ledger import MarketLedger as MarketLedger
    from node.market.ledger import Sale as Sale
    from node.market.liveness import MarketLiveness as MarketLiveness
    from node.market.purchase.buyer import Buyer as Buyer
    from node.market.purchase.channels import ChannelChain as ChannelChain
    from node.market.purchase.channels import ChannelLedger as ChannelLedger
    from node.market.purchase.channels import Claimer as Claimer
    from node.market.purchase.channels import FacadeChannels as FacadeChannels
    from node.market.purchase.reconcile import reconcile_settlements as reconcile_settlements
    from node.market.purchase.seller import Seller as Seller
    from node.market.purchase.x402_seller import serve_seller as serve_seller
    from node.market.scan import WIRE_LIMITS as WIRE_LIMITS
    from node.market.scan import EndpointSettings as EndpointSettings
    from node.market.scan import ScanReport as ScanReport
    from node.market.scan import Unscannable as Unscannable
    from node.market.scan import ask_endpoint as ask_endpoint
    from node.market.scan import ask_sampling as ask_sampling
    from node.market.scan import judge_with_endpoint as judge_with_endpoint
    from node.market.scan import market_bundle as market_bundle
    from node.market.scan import not_judged as not_judged
    from node.market.scan import read_folder as read_folder
    from node.market.scan import scan_folder as scan_folder
    from node.market.scan import scan_refused as scan_refused
    from node.market.scan import scan_text as scan_text
    from node.market.scan import skill_text as skill_text
    from node.market.scan import with_opinion as with_opinion
    from node.market.selling.niche import niche_data as niche_data
    from node.market.selling.niche import niche_source as niche_source
    from node.market.selling.pricing import FlatReputation as FlatReputation
    from node.market.selling.pricing import ReputationSource as ReputationSource
    from node.market.selling.publish import Publisher as Publisher
    from node.market.warnings import WarningDesk as WarningDesk

__getattr__ = face(__name__)
