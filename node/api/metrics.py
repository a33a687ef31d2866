"""Prometheus metrics: a tiny registry and the node's metric objects.

No client library: counters, gauges and histograms with labels, rendered in
the Prometheus text exposition format 0.0.4 at ``GET /metrics``. Other
modules import the metric objects and update them where things happen::

    from node.api.metrics import GOSSIP_MESSAGES
    GOSSIP_MESSAGES.inc(topic=topic, outcome="rejected", reason="bad_signature")

Values that live in the node (crystals by lifecycle, weather, peers) are read
at scrape time by callbacks, so nothing has to keep them in sync::

    register_callback(fill_from_node)   # sync or async, called before each scrape

Updates are thread-safe: memory work runs in worker threads.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from node.api.app import App
    from node.service import NodeService

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "crystalmesh_"
MAX_SERIES_PER_METRIC = 1000
"""Label values can come from the network (topics, reasons): cap the series per
metric so a hostile peer cannot grow our memory through the registry."""
MAX_LABEL_VALUE_CHARS = 128

LabelValues = tuple[str, ...]
Callback = Callable[[], Awaitable[None] | None]


def format_value(value: float) -> str:
    """Go-style float text as Prometheus writes it: ``+Inf``, ``-Inf``, ``NaN``, ``1.0``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{float(value):.1f}"
    return repr(float(value))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"


class Metric:
    """One metric family: a name, help text, label names and one series per label set."""

    kind = "untyped"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        if not name.startswith(PREFIX):
            raise ValueError(f"metric names start with {PREFIX!r}: {name!r}")
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)
        self._lock = threading.Lock()
        self._overflow_logged = False

    def _key(self, labels: dict[str, Any]) -> LabelValues | None:
        """The series key for these labels, or None if the series cap is reached."""
        if set(labels) != set(self.label_names):
            raise ValueError(
                f"{self.name} takes labels {sorted(self.label_names)}, got {sorted(labels)}"
            )
        return tuple(str(labels[n])[:MAX_LABEL_VALUE_CHARS] for n in self.label_names)

    def _admit(self, series: dict[LabelValues, Any], key: LabelValues) -> bool:
        if key in series or len(series) < MAX_SERIES_PER_METRIC:
            return True
        if not self._overflow_logged:
            log.warning("metric series cap reached metric=%s cap=%d", self.name,
                        MAX_SERIES_PER_METRIC)
            self._overflow_logged = True
        return False

    def samples(self) -> Iterable[tuple[str, LabelValues, float, tuple[str, ...]]]:
        """(suffix, label values, value, extra label names/values interleaved)."""
        raise NotImplementedError

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]
        for suffix, values, value, extra in self.samples():
            names = self.label_names + extra[0::2]
            all_values = values + extra[1::2]
            lines.append(f"{self.name}{suffix}{_label_text(names, all_values)} {format_value(value)}")
        return lines


class _Scalar(Metric):
    """One float per label set: the storage shared by counters and gauges."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self._values: dict[LabelValues, float] = {}

    def _add(self, amount: float, labels: dict[str, Any]) -> None:
        key = self._key(labels)
        with self._lock:
            if key is not None and self._admit(self._values, key):
                self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: Any) -> float:
        key = self._key(labels)
        with self._lock:
            return self._values.get(key, 0.0) if key is not None else 0.0

    def samples(self) -> Iterable[tuple[str, LabelValues, float, tuple[str, ...]]]:
        with self._lock:
            items = sorted(self._values.items())
        return [("", key, value, ()) for key, value in items]


class Counter(_Scalar):
    """A value that only goes up (restarts reset it; Prometheus' rate() copes)."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"counter names end in _total: {name!r}")
        super().__init__(name, help_text, labels)

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up (got {amount})")
        self._add(amount, labels)


class Gauge(_Scalar):
    """A value that goes up and down; ``clear()`` before refilling from a callback."""

    kind = "gauge"

    def set(self, value: float, **labels: Any) -> None:
        key = self._key(labels)
        with self._lock:
            if key is not None and self._admit(self._values, key):
                self._values[key] = float(value)

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        self._add(amount, labels)

    def dec(self, amount: float = 1.0, **labels: Any) -> None:
        self._add(-amount, labels)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class Histogram(Metric):
    """Observations counted into cumulative ``le`` buckets, plus ``_sum`` and ``_count``."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 buckets: Sequence[float] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                             1.0, 2.5, 5.0, 10.0)) -> None:
        if "le" in labels:
            raise ValueError("'le' is reserved for histogram buckets")
        bounds = sorted(float(b) for b in buckets if not math.isinf(b))
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError(f"{name}: buckets must be distinct finite numbers")
        super().__init__(name, help_text, labels)
        self.bounds = (*bounds, math.inf)
        self._counts: dict[LabelValues, list[int]] = {}
        self._sums: dict[LabelValues, float] = {}

    def observe(self, value: float, **labels: Any) -> None:
        key = self._key(labels)
        with self._lock:
            if key is None or not self._admit(self._counts, key):
                return
            counts = self._counts.setdefault(key, [0] * len(self.bounds))
            for index, bound in enumerate(self.bounds):
                if value <= bound:
                    counts[index] += 1
                    break
            self._sums[key] = self._sums.get(key, 0.0) + value

    def count(self, **labels: Any) -> int:
        key = self._key(labels)
        with self._lock:
            return sum(self._counts.get(key, ())) if key is not None else 0

    def samples(self) -> Iterable[tuple[str, LabelValues, float, tuple[str, ...]]]:
        with self._lock:
            snapshot = sorted((key, list(counts), self._sums[key])
                              for key, counts in self._counts.items())
        out: list[tuple[str, LabelValues, float, tuple[str, ...]]] = []
        for key, counts, total in snapshot:
            cumulative = 0
            for bound, count in zip(self.bounds, counts, strict=True):
                cumulative += count
                out.append(("_bucket", key, float(cumulative), ("le", format_value(bound))))
            out.append(("_sum", key, total, ()))
            out.append(("_count", key, float(cumulative), ()))
        return out


class Registry:
    """Metric families plus callbacks that refresh gauges just before a scrape."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._callbacks: list[Callback] = []
        self._lock = threading.Lock()

    def register(self, metric: Metric) -> Metric:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"metric {metric.name} is already registered")
            self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        metric = Counter(name, help_text, labels)
        self.register(metric)
        return metric

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        metric = Gauge(name, help_text, labels)
        self.register(metric)
        return metric

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] | None = None) -> Histogram:
        metric = (Histogram(name, help_text, labels, buckets) if buckets
                  else Histogram(name, help_text, labels))
        self.register(metric)
        return metric

    def register_callback(self, callback: Callback) -> Callback:
        """Call ``callback()`` (sync, or async returning an awaitable) before every scrape."""
        with self._lock:
            self._callbacks.append(callback)
        return callback

    def unregister_callback(self, callback: Callback) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def render(self) -> str:
        with self._lock:
            metrics = sorted(self._metrics.values(), key=lambda m: m.name)
        lines: list[str] = []
        for metric in metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"

    async def scrape(self) -> str:
        """Run the callbacks, then render. A failing callback is logged, never fatal:
        a broken collector must not hide every other metric."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("metrics callback failed callback=%r", callback)
        return self.render()


REGISTRY = Registry()
register_callback = REGISTRY.register_callback

# --- gossip ---------------------------------------------------------------------------------
GOSSIP_MESSAGES = REGISTRY.counter(
    "crystalmesh_gossip_messages_total",
    "Gossip messages received, by topic and outcome (accepted, rejected, ignored) and reason.",
    ("topic", "outcome", "reason"),
)
GOSSIP_PUBLISHED = REGISTRY.counter(
    "crystalmesh_gossip_published_total", "Gossip messages this node published, by topic.",
    ("topic",),
)
GOSSIP_LATENCY = REGISTRY.histogram(
    "crystalmesh_gossip_latency_seconds",
    "Delay from a message's issued_at to its receipt here, by topic.",
    ("topic",),
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
PEERS = REGISTRY.gauge(
    "crystalmesh_peers", "Peers by state (connected, known, banned), read at scrape time.",
    ("state",),
)

# --- market and chain -----------------------------------------------------------------------
PURCHASES = REGISTRY.counter(
    "crystalmesh_purchases_total",
    "Skill purchases this node attempted as a buyer, by outcome (ok, rejected, failed).",
    ("outcome",),
)
SALES = REGISTRY.counter(
    "crystalmesh_sales_total", "Skill sales this node served as a seller, by outcome.",
    ("outcome",),
)
MARKET_MICRO_USDC = REGISTRY.counter(
    "crystalmesh_market_micro_usdc_total",
    "Micro-USDC moved by this node's purchases, by direction (spent, earned).",
    ("direction",),
)
SETTLEMENTS = REGISTRY.counter(
    "crystalmesh_settlements_total",
    "On-chain settlements submitted, by outcome (ok, reverted, failed).",
    ("outcome",),
)
SETTLEMENT_GAS = REGISTRY.histogram(
    "crystalmesh_settlement_gas_used",
    "Gas used per settlement transaction.",
    (),
    buckets=(30_000, 50_000, 75_000, 100_000, 150_000, 250_000, 500_000, 1_000_000, 2_000_000),
)
LISTINGS_KNOWN = REGISTRY.gauge(
    "crystalmesh_listings_known", "Active skill listings this node knows, read at scrape time.",
)

# --- memory ---------------------------------------------------------------------------------
CRYSTALS = REGISTRY.gauge(
    "crystalmesh_crystals", "Crystals in local memory by lifecycle, read at scrape time.",
    ("lifecycle",),
)
CRYSTALS_BY_TYPE = REGISTRY.gauge(
    "crystalmesh_crystals_by_type", "Crystals in local memory by semantic type.", ("type",),
)
SUBSYSTEM_RESTARTS = REGISTRY.counter(
    "crystalmesh_subsystem_restarts_total",
    "Subsystems restarted by the supervisor after they raised, by subsystem.",
    ("subsystem",),
)
CONSOLIDATION_RUNS = REGISTRY.counter(
    "crystalmesh_consolidation_runs_total", "Memory consolidation runs, by outcome (ok, failed).",
    ("outcome",),
)

# --- weather --------------------------------------------------------------------------------
WEATHER_ACTIVE = REGISTRY.gauge(
    "crystalmesh_weather_active", "1 while a network weather alert is in force, else 0.",
)
WEATHER_LEVEL = REGISTRY.gauge(
    "crystalmesh_weather_level", "Network cortisol level of the alert in force (0..1).",
)
WEATHER_REMAINING = REGISTRY.gauge(
    "crystalmesh_weather_remaining_seconds", "Seconds until the weather alert in force expires.",
)

# --- node -----------------------------------------------------------------------------------
NODE_INFO = REGISTRY.gauge(
    "crystalmesh_node_info", "Always 1; labels name this node.", ("name", "peer_id"),
)
UPTIME = REGISTRY.gauge("crystalmesh_uptime_seconds", "Seconds since this node started.")


# --- wiring ---------------------------------------------------------------------------------
def node_collector(node: NodeService) -> Callable[[], Awaitable[None]]:
    """A scrape-time callback filling the gauges that mirror ``node``'s state."""

    async def collect() -> None:
        status = await node.status()
        memory_stats = await node.memory.run(node.memory.memory.store.stats)
        peers = node.peers()
        PEERS.set(sum(1 for p in peers if p.get("connected")), state="connected")
        PEERS.set(len(peers), state="known")
        PEERS.set(sum(1 for p in peers if p.get("banned")), state="banned")
        LISTINGS_KNOWN.set(status.get("listings_known") or 0)
        CRYSTALS.clear()
        for lifecycle, count in (memory_stats.get("by_lifecycle") or {}).items():
            CRYSTALS.set(count, lifecycle=lifecycle)
        CRYSTALS_BY_TYPE.clear()
        for semantic_type, count in (memory_stats.get("by_type") or {}).items():
            CRYSTALS_BY_TYPE.set(count, type=semantic_type)
        weather = status.get("weather") or {}
        WEATHER_ACTIVE.set(1.0 if weather.get("active") else 0.0)
        WEATHER_LEVEL.set(float(weather.get("level") or 0.0))
        WEATHER_REMAINING.set((weather.get("remaining_ms") or 0) / 1000)
        NODE_INFO.clear()
        NODE_INFO.set(1.0, name=status.get("name", ""), peer_id=status.get("peer_id", ""))
        UPTIME.set(float(status.get("uptime_s") or 0))

    return collect


def register_metrics(app: App, node: NodeService | None = None,
                     registry: Registry = REGISTRY) -> None:
    """Add the public ``GET /metrics`` route to ``app``.

    With ``node``, its gauges are refreshed at each scrape by this app only (not by a
    registry-wide callback), so several in-process nodes in a test do not fight over
    one process's gauges through callbacks that outlive them.
    """
    from node.api.app import Request, Response

    collect = node_collector(node) if node is not None else None

    @app.route("GET", "/metrics", public=True)
    async def metrics(request: Request) -> Response:
        if collect is not None:
            try:
                await collect()
            except Exception:
                log.exception("metrics node collector failed")
        text = await registry.scrape()
        return Response(200, text.encode(), CONTENT_TYPE)
