"""Trust in peers: the interaction ledger, EigenTrust over signed reports, levels and
the ingestion gate.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.trust.gate import GateDecision as GateDecision
    from node.trust.ledger import Ledger as Ledger
    from node.trust.levels import TrustLevel as TrustLevel
    from node.trust.service import TrustService as TrustService

__getattr__ = face(__name__)
