"""node.metrics on prometheus_client: the families a node exposes, parsed back with the
library's own text parser (so the exposition format is the standard one)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from node import metrics


def families() -> dict[str, str]:
    text = generate_latest(metrics.REGISTRY).decode()
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def test_node_registry_exposes_the_node_metrics() -> None:
    metrics.GOSSIP_MESSAGES.labels(topic="/crystalmesh/1/skills", outcome="accepted", reason="").inc()
    metrics.GOSSIP_LATENCY.labels(topic="/crystalmesh/1/skills").observe(0.2)
    metrics.SETTLEMENT_GAS.observe(80_000)
    expected = {
        "crystalmesh_gossip_messages": "counter",
        "crystalmesh_gossip_latency_seconds": "histogram",
        "crystalmesh_peers": "gauge",
        "crystalmesh_purchases": "counter",
        "crystalmesh_settlements": "counter",
        "crystalmesh_settlement_gas_used": "histogram",
        "crystalmesh_crystals": "gauge",
        "crystalmesh_consolidation_runs": "counter",
        "crystalmesh_subsystem_restarts": "counter",
        "crystalmesh_weather_active": "gauge",
        "crystalmesh_weather_level": "gauge",
        "crystalmesh_weather_remaining_seconds": "gauge",
    }
    found = families()
    assert {name: found.get(name) for name in expected} == expected
    assert all(name.startswith("crystalmesh_") for name in found)
