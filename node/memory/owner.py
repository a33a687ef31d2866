"""What memory that learns needs from a node's memory (``node.memory.facade.Memory`` satisfies it).

``learning``, ``tiers``, ``testament_io`` and ``budget_context`` are used by the
facade, so they name this protocol instead of importing the facade back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from node.config import NodeConfig
from node.crystals import AccessScope, Crystal, CrystalStore, Origin, SemanticType, VectorIndex
from node.db import Database
from node.memory.dynamics import HormonalStateManager
from node.memory.search import SearchHit, SearchRequest


class MemoryOwner(Protocol):
    config: NodeConfig
    db: Database
    store: CrystalStore
    index: VectorIndex
    hormones: HormonalStateManager

    def prepare(
        self,
        text: str,
        *,
        semantic_type: SemanticType = ...,
        scope: AccessScope | None = ...,
        origin: Origin = ...,
        path: str | None = ...,
        actor: str = ...,
        namespace: str = ...,
        **extra: Any,
    ) -> Crystal: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_windows(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray | None]]: ...

    def second_opinions(self, crystals: Sequence[Crystal]) -> None: ...

    def get(self, crystal_id: str) -> Crystal: ...

    def search(self, request: SearchRequest) -> list[SearchHit]: ...

    def add_crystals(self, crystals: Sequence[Crystal], vectors: np.ndarray | None = None,
                     windows: Sequence[np.ndarray | None] | None = None,
                     beside: Callable[[sqlite3.Connection, list[Any]], None] | None = None) -> list[Any]: ...
