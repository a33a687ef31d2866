"""Knowledge crystals (seed 000): the model, the store and its reads, the HNSW index,
versions, governance and provenance. Search lives in ``node.memory.search``.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.crystals import governance as governance
    from node.crystals import provenance as provenance
    from node.crystals.epistemic import Acquisition as Acquisition
    from node.crystals.epistemic import EpistemicLayer as EpistemicLayer
    from node.crystals.epistemic import epistemic_layer as epistemic_layer
    from node.crystals.epistemic import precedence as precedence
    from node.crystals.governance import ttl_elapsed as ttl_elapsed
    from node.crystals.index import IndexParams as IndexParams
    from node.crystals.index import ProgressCallback as ProgressCallback
    from node.crystals.index import VectorIndex as VectorIndex
    from node.crystals.index import file_sha256 as file_sha256
    from node.crystals.index import stderr_progress as stderr_progress
    from node.crystals.model import KNOWLEDGE_TYPES as KNOWLEDGE_TYPES
    from node.crystals.model import LOCAL_ONLY_SCOPES as LOCAL_ONLY_SCOPES
    from node.crystals.model import AccessScope as AccessScope
    from node.crystals.model import Crystal as Crystal
    from node.crystals.model import ExecutionStats as ExecutionStats
    from node.crystals.model import Governance as Governance
    from node.crystals.model import HormonalInfluence as HormonalInfluence
    from node.crystals.model import Lifecycle as Lifecycle
    from node.crystals.model import LifespanPolicy as LifespanPolicy
    from node.crystals.model import Origin as Origin
    from node.crystals.model import ProvenanceNode as ProvenanceNode
    from node.crystals.model import ProvenanceOperation as ProvenanceOperation
    from node.crystals.model import SemanticType as SemanticType
    from node.crystals.model import Sensitivity as Sensitivity
    from node.crystals.model import Source as Source
    from node.crystals.model import content_hash as content_hash
    from node.crystals.model import now_ms as now_ms
    from node.crystals.reads import SearchRow as SearchRow
    from node.crystals.rows import COLUMNS as COLUMNS
    from node.crystals.rows import COLUMNS_WITHOUT_EMBEDDING as COLUMNS_WITHOUT_EMBEDDING
    from node.crystals.rows import crystal_values as crystal_values
    from node.crystals.rows import row_to_crystal as row_to_crystal
    from node.crystals.rows import vector_bytes as vector_bytes
    from node.crystals.store import CrystalNotFound as CrystalNotFound
    from node.crystals.store import CrystalStore as CrystalStore
    from node.crystals.store import Filters as Filters
    from node.crystals.store import StoreError as StoreError

__getattr__ = face(__name__)
