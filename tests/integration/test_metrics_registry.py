"""The metrics registry renders Prometheus text format 0.0.4 that parses back exactly."""

from __future__ import annotations

import math
import re

import pytest

from node.api import metrics
from node.api.metrics import Counter, Gauge, Histogram, Registry

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def _unescape(value: str) -> str:
    out, index = [], 0
    while index < len(value):
        char = value[index]
        if char == "\\":
            following = value[index + 1]
            out.append({"n": "\n", "\\": "\\", '"': '"'}[following])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def parse(text: str) -> tuple[dict[str, str], dict[str, str], dict[tuple[str, frozenset], float]]:
    """A strict little parser: (help by name, type by name, {(name, labels): value})."""
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    samples: dict[tuple[str, frozenset], float] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            helps[name] = help_text.replace("\\n", "\n").replace("\\\\", "\\")
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            types[name] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"unparsable line {line!r}"
            labels_text = match.group("labels") or ""
            labels = {key: _unescape(raw) for key, raw in _LABEL.findall(labels_text)}
            if labels_text:
                rebuilt = ",".join(f'{k}="{v}"' for k, v in _LABEL.findall(labels_text))
                assert rebuilt == labels_text, f"labels did not parse cleanly: {labels_text!r}"
            key = (match.group("name"), frozenset(labels.items()))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = float(match.group("value"))
    return helps, types, samples


def test_counter_and_gauge_round_trip() -> None:
    registry = Registry()
    messages = registry.counter("crystalmesh_test_messages_total", "Messages.", ("topic", "outcome"))
    peers = registry.gauge("crystalmesh_test_peers", "Peers.")
    messages.inc(topic="skills", outcome="accepted")
    messages.inc(2, topic="skills", outcome="accepted")
    messages.inc(topic="weather", outcome="rejected")
    peers.set(4)
    peers.dec()
    helps, types, samples = parse(registry.render())
    assert types == {"crystalmesh_test_messages_total": "counter", "crystalmesh_test_peers": "gauge"}
    assert helps["crystalmesh_test_peers"] == "Peers."
    total = "crystalmesh_test_messages_total"
    assert samples[(total, frozenset({("topic", "skills"), ("outcome", "accepted")}))] == 3.0
    assert samples[(total, frozenset({("topic", "weather"), ("outcome", "rejected")}))] == 1.0
    assert samples[("crystalmesh_test_peers", frozenset())] == 3.0


def test_label_values_are_escaped() -> None:
    registry = Registry()
    counter = registry.counter("crystalmesh_test_reasons_total", "Help with \\ and\nnewline.",
                               ("reason",))
    nasty = 'quote " backslash \\ newline \n comma, brace } equals ='
    counter.inc(reason=nasty)
    text = registry.render()
    assert "\n" not in text.split("crystalmesh_test_reasons_total{", 1)[1].split("} ", 1)[0]
    helps, _, samples = parse(text)
    assert helps["crystalmesh_test_reasons_total"] == "Help with \\ and\nnewline."
    assert samples[("crystalmesh_test_reasons_total", frozenset({("reason", nasty)}))] == 1.0


def test_histogram_buckets_are_cumulative_with_inf_sum_and_count() -> None:
    registry = Registry()
    latency = registry.histogram("crystalmesh_test_latency_seconds", "Latency.", ("topic",),
                                 buckets=(0.1, 1.0, 5.0))
    for value in (0.05, 0.1, 0.5, 2.0, 100.0):
        latency.observe(value, topic="skills")
    _, types, samples = parse(registry.render())
    assert types["crystalmesh_test_latency_seconds"] == "histogram"

    def bucket(le: str) -> float:
        key = frozenset({("topic", "skills"), ("le", le)})
        return samples[("crystalmesh_test_latency_seconds_bucket", key)]

    # 0.1 is in the 0.1 bucket: le means "less than or equal".
    assert [bucket(le) for le in ("0.1", "1.0", "5.0", "+Inf")] == [2.0, 3.0, 4.0, 5.0]
    topic = frozenset({("topic", "skills")})
    assert samples[("crystalmesh_test_latency_seconds_count", topic)] == 5.0
    assert samples[("crystalmesh_test_latency_seconds_sum", topic)] == pytest.approx(102.65)
    assert latency.count(topic="skills") == 5


def test_values_use_prometheus_float_text() -> None:
    assert metrics.format_value(3) == "3.0"
    assert metrics.format_value(0.25) == "0.25"
    assert metrics.format_value(math.inf) == "+Inf"
    assert metrics.format_value(-math.inf) == "-Inf"
    assert metrics.format_value(math.nan) == "NaN"


def test_misuse_is_refused_and_changes_nothing() -> None:
    registry = Registry()
    counter = registry.counter("crystalmesh_test_things_total", "Things.", ("kind",))
    with pytest.raises(ValueError):
        counter.inc(-1, kind="a")
    with pytest.raises(ValueError):
        counter.inc(kind="a", extra="b")
    with pytest.raises(ValueError):
        counter.inc()
    assert counter.value(kind="a") == 0.0
    with pytest.raises(ValueError):
        registry.counter("crystalmesh_test_things_total", "Again.")
    with pytest.raises(ValueError):
        Counter("crystalmesh_test_no_suffix", "Counters end in _total.")
    with pytest.raises(ValueError):
        Gauge("other_prefix", "Names start with crystalmesh_.")
    with pytest.raises(ValueError):
        Histogram("crystalmesh_test_h", "le is reserved.", ("le",))


def test_series_per_metric_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MAX_SERIES_PER_METRIC", 3)
    registry = Registry()
    counter = registry.counter("crystalmesh_test_topics_total", "Topics.", ("topic",))
    for index in range(10):
        counter.inc(topic=f"t{index}")
    counter.inc(topic="t0")
    _, _, samples = parse(registry.render())
    assert len(samples) == 3
    assert counter.value(topic="t0") == 2.0


async def test_callbacks_fill_gauges_at_scrape_and_failures_are_contained() -> None:
    registry = Registry()
    crystals = registry.gauge("crystalmesh_test_crystals", "Crystals.", ("lifecycle",))
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise RuntimeError("collector bug")

    async def fill() -> None:
        calls.append("fill")
        crystals.clear()
        crystals.set(7, lifecycle="generated")

    registry.register_callback(broken)
    registry.register_callback(fill)
    _, _, samples = parse(await registry.scrape())
    assert calls == ["broken", "fill"]
    assert samples[("crystalmesh_test_crystals", frozenset({("lifecycle", "generated")}))] == 7.0
    registry.unregister_callback(fill)
    await registry.scrape()
    assert calls == ["broken", "fill", "broken"]


def test_default_registry_exposes_the_node_metrics() -> None:
    metrics.GOSSIP_MESSAGES.inc(topic="crystalmesh/skills/1", outcome="accepted", reason="")
    metrics.GOSSIP_LATENCY.observe(0.2, topic="crystalmesh/skills/1")
    metrics.SETTLEMENT_GAS.observe(80_000)
    _, types, _ = parse(metrics.REGISTRY.render())
    expected = {
        "crystalmesh_gossip_messages_total": "counter",
        "crystalmesh_gossip_latency_seconds": "histogram",
        "crystalmesh_peers": "gauge",
        "crystalmesh_purchases_total": "counter",
        "crystalmesh_settlements_total": "counter",
        "crystalmesh_settlement_gas_used": "histogram",
        "crystalmesh_crystals": "gauge",
        "crystalmesh_consolidation_runs_total": "counter",
        "crystalmesh_weather_active": "gauge",
        "crystalmesh_weather_level": "gauge",
        "crystalmesh_weather_remaining_seconds": "gauge",
    }
    assert {name: types.get(name) for name in expected} == expected
    assert all(name.startswith("crystalmesh_") for name in types)
