from node.crystals.model import ProvenanceNode, ProvenanceOperation
from node.crystals.provenance import (
    attribution_chain,
    created_node,
    derivation_tree,
    imported_node,
    merged_node,
)


def lookup(nodes: list[ProvenanceNode]):
    by_id: dict[str, list[ProvenanceNode]] = {}
    for node in nodes:
        by_id.setdefault(node.crystal_id, []).append(node)
    calls: list[str] = []

    def get_dag(crystal_id: str) -> list[ProvenanceNode]:
        calls.append(crystal_id)
        return by_id.get(crystal_id, [])

    return get_dag, calls


def test_constructors() -> None:
    created = created_node("a", 10)
    assert (created.operation, created.actor, created.parent_ids) == (
        ProvenanceOperation.CREATED,
        "local_agent",
        [],
    )
    imported = imported_node("b", "ab12", 20, source_crystal_id="seller-b", metadata={"tx": "0x1"})
    assert imported.actor == "peer:ab12"
    assert imported.parent_ids == ["seller-b"]
    assert imported.metadata == {"tx": "0x1"}
    assert imported_node("b", "ab12", 20, source_crystal_id="b").parent_ids == []
    merged = merged_node("w", ["l1", "l2", "l1", "w"], 30, similarity=0.95)
    assert merged.operation == ProvenanceOperation.MERGED
    assert merged.parent_ids == ["l1", "l2"]
    assert merged.metadata == {"similarity": 0.95}


def test_derivation_tree_of_a_merge() -> None:
    get_dag, _ = lookup(
        [
            created_node("l1", 1),
            imported_node("l2", "ab12", 2, source_crystal_id="s"),
            created_node("s", 0, actor="peer:ab12"),
            created_node("w", 3),
            merged_node("w", ["l1", "l2"], 4),
        ]
    )
    tree = derivation_tree("w", get_dag)
    assert tree["crystalId"] == "w"
    assert [n["operation"] for n in tree["nodes"]] == ["created", "merged"]
    assert [p["crystalId"] for p in tree["parents"]] == ["l1", "l2"]
    assert tree["parents"][1]["parents"][0]["crystalId"] == "s"
    assert tree["parents"][1]["parents"][0]["parents"] == []


def test_derivation_tree_stops_at_max_depth() -> None:
    # chain c0 ← c1 ← ... ← c9 (c_k derived from c_{k+1})
    chain = [merged_node(f"c{k}", [f"c{k + 1}"], k) for k in range(9)]
    get_dag, _ = lookup(chain)
    tree = derivation_tree("c0", get_dag, max_depth=2)
    level2 = tree["parents"][0]["parents"][0]
    assert level2["crystalId"] == "c2"
    assert level2["truncated"] is True
    assert level2["parents"] == []


def test_derivation_tree_survives_cycles() -> None:
    get_dag, calls = lookup([merged_node("a", ["b"], 1), merged_node("b", ["a"], 2)])
    tree = derivation_tree("a", get_dag)
    assert tree["parents"][0]["crystalId"] == "b"
    assert tree["parents"][0]["parents"] == [{"crystalId": "a", "cycle": True}]
    assert calls == ["a", "b"]  # each crystal looked up once


def test_derivation_tree_ignores_foreign_nodes_in_a_dag() -> None:
    # a delivered DAG for "x" also carries its ancestor's node; only x's own nodes count
    foreign = created_node("y", 0, actor="peer:ff")
    own = merged_node("x", ["y"], 1)

    def get_dag(crystal_id: str) -> list[ProvenanceNode]:
        return [foreign, own] if crystal_id == "x" else []

    tree = derivation_tree("x", get_dag)
    assert [n["crystalId"] for n in tree["nodes"]] == ["x"]
    assert tree["parents"][0] == {"crystalId": "y", "nodes": [], "parents": []}


def test_attribution_chain_is_bfs_and_unique() -> None:
    get_dag, _ = lookup(
        [
            merged_node("w", ["l1", "l2"], 5),
            created_node("l1", 1, actor="dream_engine"),
            imported_node("l2", "ab", 2, source_crystal_id="s"),
            merged_node("s", ["t"], 1, actor="peer:cd"),
            created_node("t", 0, actor="local_agent"),
        ]
    )
    # BFS: w (local_agent) → l1 (dream_engine), l2 (peer:ab) → s (peer:cd) → t (local_agent, seen)
    assert attribution_chain("w", get_dag) == ["local_agent", "dream_engine", "peer:ab", "peer:cd"]


def test_attribution_chain_survives_cycles() -> None:
    get_dag, _ = lookup(
        [merged_node("a", ["b"], 1, actor="x"), merged_node("b", ["a"], 2, actor="y")]
    )
    assert attribution_chain("a", get_dag) == ["x", "y"]


def test_unknown_crystal() -> None:
    get_dag, _ = lookup([])
    assert derivation_tree("nope", get_dag) == {"crystalId": "nope", "nodes": [], "parents": []}
    assert attribution_chain("nope", get_dag) == []
