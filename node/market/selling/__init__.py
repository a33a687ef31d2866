"""Selling: quality gates, pricing, publishing and the seller's catalogue.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.market.selling.catalogue import SWEEP_INTERVAL_S as SWEEP_INTERVAL_S
    from node.market.selling.catalogue import Catalogue as Catalogue
    from node.market.selling.niche import niche_data as niche_data
    from node.market.selling.niche import niche_source as niche_source
    from node.market.selling.pricing import FlatReputation as FlatReputation
    from node.market.selling.pricing import ReputationSource as ReputationSource
    from node.market.selling.publish import Publisher as Publisher

__getattr__ = face(__name__)
