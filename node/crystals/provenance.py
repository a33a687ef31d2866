"""Provenance DAG: where a crystal came from (seed 000, ``MemoryGovernance``).

Each crystal carries ``ProvenanceNode`` entries whose ``parent_ids`` point to the
crystals it was derived from (several for a merge). These helpers walk that
lineage through a lookup function, so they work the same over the store, an
in-memory dict or a peer's delivered DAG, and they never loop on a cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from node.crystals.model import ProvenanceNode, ProvenanceOperation

LOCAL_AGENT = "local_agent"
DREAM_ENGINE = "dream_engine"
DEFAULT_MAX_DEPTH = 5

GetDag = Callable[[str], list[ProvenanceNode]]


def peer_actor(peer_key: str) -> str:
    """Actor name for a peer, as in the seed: ``"peer:<pubkey>"``."""
    return f"peer:{peer_key}"


def _own_nodes(crystal_id: str, dag: Iterable[ProvenanceNode]) -> list[ProvenanceNode]:
    # A delivered DAG may also carry its ancestors' nodes; only this crystal's
    # own nodes say what it was derived from.
    return [node for node in dag if node.crystal_id == crystal_id]


def _parents(nodes: Iterable[ProvenanceNode]) -> list[str]:
    seen: dict[str, None] = {}
    for node in nodes:
        for parent in node.parent_ids:
            seen.setdefault(parent, None)
    return list(seen)


def derivation_tree(
    crystal_id: str, get_dag: GetDag, max_depth: int = DEFAULT_MAX_DEPTH
) -> dict[str, Any]:
    """Lineage of ``crystal_id`` as nested dicts, ``max_depth`` levels of parents deep.

    Seed: "``getDerivationTree()`` recursively builds the tree up to depth 5."

    Each level is ``{"crystalId", "nodes": [node dicts], "parents": [subtrees]}``
    plus ``"truncated": True`` where parents exist beyond ``max_depth`` and
    ``"cycle": True`` where a parent is already an ancestor on the current path
    (it is not expanded again). A crystal shared by two branches appears in both.
    """
    cache: dict[str, list[ProvenanceNode]] = {}

    def nodes_of(node_id: str) -> list[ProvenanceNode]:
        if node_id not in cache:
            cache[node_id] = _own_nodes(node_id, get_dag(node_id))
        return cache[node_id]

    def build(node_id: str, depth: int, ancestors: frozenset[str]) -> dict[str, Any]:
        nodes = nodes_of(node_id)
        tree: dict[str, Any] = {
            "crystalId": node_id,
            "nodes": [node.to_dict() for node in nodes],
            "parents": [],
        }
        parents = _parents(nodes)
        if parents and depth >= max_depth:
            tree["truncated"] = True
            return tree
        for parent in parents:
            if parent in ancestors or parent == node_id:
                tree["parents"].append({"crystalId": parent, "cycle": True})
            else:
                tree["parents"].append(build(parent, depth + 1, ancestors | {node_id}))
        return tree

    return build(crystal_id, 0, frozenset())


def attribution_chain(crystal_id: str, get_dag: GetDag, max_crystals: int = 10_000) -> list[str]:
    """Every distinct actor in the lineage, nearest first.

    Seed: "``getAttributionChain()`` returns all unique actors in the lineage via BFS."
    Visits each crystal once (cycle-safe) and at most ``max_crystals`` crystals.
    """
    actors: dict[str, None] = {}
    visited = {crystal_id}
    queue: deque[str] = deque([crystal_id])
    while queue:
        current = queue.popleft()
        nodes = _own_nodes(current, get_dag(current))
        for node in nodes:
            actors.setdefault(node.actor, None)
        for parent in _parents(nodes):
            if parent not in visited and len(visited) < max_crystals:
                visited.add(parent)
                queue.append(parent)
    return list(actors)


def created_node(
    crystal_id: str,
    timestamp_ms: int,
    actor: str = LOCAL_AGENT,
    metadata: dict[str, Any] | None = None,
) -> ProvenanceNode:
    """A crystal made from nothing earlier (indexed file, user input, session)."""
    return ProvenanceNode(
        crystal_id, ProvenanceOperation.CREATED, actor, timestamp_ms, [], dict(metadata or {})
    )


def imported_node(
    crystal_id: str,
    peer_key: str,
    timestamp_ms: int,
    source_crystal_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> ProvenanceNode:
    """A crystal bought or received from a peer.

    ``source_crystal_id`` (the seller's id, when it differs from ours) becomes the
    parent, so the seller's own lineage, if delivered, joins the tree.
    """
    parents = [source_crystal_id] if source_crystal_id and source_crystal_id != crystal_id else []
    return ProvenanceNode(
        crystal_id,
        ProvenanceOperation.IMPORTED,
        peer_actor(peer_key),
        timestamp_ms,
        parents,
        dict(metadata or {}),
    )


def merged_node(
    crystal_id: str,
    parent_ids: Sequence[str],
    timestamp_ms: int,
    actor: str = LOCAL_AGENT,
    similarity: float | None = None,
    metadata: dict[str, Any] | None = None,
) -> ProvenanceNode:
    """The consolidation winner ``crystal_id`` absorbed ``parent_ids`` (the losers).

    Note the directions: the archived loser's ``Crystal.parent_id`` points to the
    winner, while the winner's provenance points back to the losers it absorbed.
    """
    extra = dict(metadata or {})
    if similarity is not None:
        extra["similarity"] = similarity
    parents = [parent for parent in dict.fromkeys(parent_ids) if parent != crystal_id]
    return ProvenanceNode(
        crystal_id, ProvenanceOperation.MERGED, actor, timestamp_ms, parents, extra
    )
