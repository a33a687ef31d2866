"""The node's Prometheus metrics, on ``prometheus_client``.

Below every concept: gossip, market, chain and memory code count here, and the
HTTP layer (``node/api/metrics.py``) only renders ``REGISTRY`` at ``GET /metrics``.
One registry per process, not the library's global default, so what a node
exposes is exactly what is defined here.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

# --- gossip ---------------------------------------------------------------------------------
GOSSIP_MESSAGES = Counter(
    "crystalmesh_gossip_messages",
    "Gossip messages received, by topic and outcome (accepted, rejected, ignored) and reason.",
    ("topic", "outcome", "reason"), registry=REGISTRY,
)
GOSSIP_PUBLISHED = Counter(
    "crystalmesh_gossip_published", "Gossip messages this node published, by topic.",
    ("topic",), registry=REGISTRY,
)
GOSSIP_LATENCY = Histogram(
    "crystalmesh_gossip_latency_seconds",
    "Delay from a message's issued_at to its receipt here, by topic.",
    ("topic",), registry=REGISTRY,
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
NETWORK_FAILURES = Counter(
    "crystalmesh_network_failures",
    "Routine network failures, by kind (dial, dht_stream, dht_query, dht_lookup, stream_open, "
    "stream_reset, stream_refused, connection): logged at debug only (node/net/failures.py).",
    ("kind",), registry=REGISTRY,
)
PEERS = Gauge(
    "crystalmesh_peers", "Peers by state (connected, known, banned), read at scrape time.",
    ("state",), registry=REGISTRY,
)

# --- reachability (node/net/reach/reachability.py) -------------------------------------------------
REACHABILITY = Gauge(
    "crystalmesh_reachability",
    "1 for this node's AutoNAT verdict (public, private, unknown), 0 for the others.",
    ("state",), registry=REGISTRY,
)
RELAY_RESERVATIONS = Gauge(
    "crystalmesh_relay_reservations",
    "Relay reservations: held by this node on relays (held), or served to peers (served).",
    ("role",), registry=REGISTRY,
)
RELAY_CIRCUITS = Gauge(
    "crystalmesh_relay_circuits", "Circuits this node relays right now.", registry=REGISTRY,
)
RELAY_BYTES = Counter(
    "crystalmesh_relay_bytes", "Bytes this node relayed for others (both directions).",
    registry=REGISTRY,
)
RELAY_REFUSED = Counter(
    "crystalmesh_relay_refused",
    "Hop requests refused or circuits cut by this node's relay limits, by reason.",
    ("reason",), registry=REGISTRY,
)
RELAYED_DIALS = Counter(
    "crystalmesh_relayed_dials",
    "Connections this node opened through a relay, by outcome (ok, failed).",
    ("outcome",), registry=REGISTRY,
)
HOLE_PUNCHES = Counter(
    "crystalmesh_hole_punches",
    "Relayed connections upgraded to direct ones (DCUtR or a reverse dial), by outcome.",
    ("outcome",), registry=REGISTRY,
)

# --- market and chain -----------------------------------------------------------------------
PURCHASES = Counter(
    "crystalmesh_purchases",
    "Skill purchases this node attempted as a buyer, by outcome (ok, rejected, failed).",
    ("outcome",), registry=REGISTRY,
)
SALES = Counter(
    "crystalmesh_sales", "Skill sales this node served as a seller, by outcome.",
    ("outcome",), registry=REGISTRY,
)
MARKET_MICRO_USDC = Counter(
    "crystalmesh_market_micro_usdc",
    "Micro-USDC moved by this node's purchases, by direction (spent, earned).",
    ("direction",), registry=REGISTRY,
)
SETTLEMENTS = Counter(
    "crystalmesh_settlements",
    "On-chain settlements submitted, by outcome (ok, rejected, failed).",
    ("outcome",), registry=REGISTRY,
)
VOUCHERS = Counter(
    "crystalmesh_vouchers",
    "Voucher purchases this node sold, by outcome (recorded, or the refusal reason).",
    ("outcome",), registry=REGISTRY,
)
CHANNEL_DEPOSITS = Counter(
    "crystalmesh_channel_deposits",
    "Buyers' channel deposits this node submitted, by outcome (ok, failed).",
    ("outcome",), registry=REGISTRY,
)
CHANNEL_CLAIMS = Counter(
    "crystalmesh_channel_claims",
    "Voucher claims this node sent, by outcome (mined, failed).",
    ("outcome",), registry=REGISTRY,
)
CHANNEL_CLAIM_GAS = Counter(
    "crystalmesh_channel_claim_gas",
    "Gas used by this node's mined voucher claims and refunds.",
    registry=REGISTRY,
)
UNCLAIMED_EXPOSURE = Gauge(
    "crystalmesh_unclaimed_exposure_micro_usdc",
    "Vouchers this node recorded and has not claimed yet, across its channels (micro-USDC); "
    "read at scrape time.",
    registry=REGISTRY,
)
SETTLEMENT_GAS = Histogram(
    "crystalmesh_settlement_gas_used", "Gas used per settlement transaction.", registry=REGISTRY,
    buckets=(30_000, 50_000, 75_000, 100_000, 150_000, 250_000, 500_000, 1_000_000, 2_000_000),
)
LISTINGS_KNOWN = Gauge(
    "crystalmesh_listings_known", "Active skill listings this node knows, read at scrape time.",
    registry=REGISTRY,
)

# --- memory ---------------------------------------------------------------------------------
CRYSTALS = Gauge(
    "crystalmesh_crystals", "Crystals in local memory by lifecycle, read at scrape time.",
    ("lifecycle",), registry=REGISTRY,
)
CRYSTALS_BY_TYPE = Gauge(
    "crystalmesh_crystals_by_type", "Crystals in local memory by semantic type.", ("type",),
    registry=REGISTRY,
)
CONSOLIDATION_RUNS = Counter(
    "crystalmesh_consolidation_runs", "Memory consolidation runs, by outcome (ok, failed).",
    ("outcome",), registry=REGISTRY,
)

# --- node -----------------------------------------------------------------------------------
SUBSYSTEM_RESTARTS = Counter(
    "crystalmesh_subsystem_restarts",
    "Subsystems restarted by the supervisor after they raised, by subsystem.",
    ("subsystem",), registry=REGISTRY,
)
WEATHER_ACTIVE = Gauge(
    "crystalmesh_weather_active", "1 while a network weather alert is in force, else 0.",
    registry=REGISTRY,
)
WEATHER_LEVEL = Gauge(
    "crystalmesh_weather_level", "Network cortisol level of the alert in force (0..1).",
    registry=REGISTRY,
)
WEATHER_REMAINING = Gauge(
    "crystalmesh_weather_remaining_seconds", "Seconds until the weather alert in force expires.",
    registry=REGISTRY,
)
NODE_INFO = Gauge(
    "crystalmesh_node_info", "Always 1; labels name this node.", ("name", "peer_id"),
    registry=REGISTRY,
)
UPTIME = Gauge("crystalmesh_uptime_seconds", "Seconds since this node started.", registry=REGISTRY)

# --- stores (node/db.py, issue 30) -------------------------------------------------------------
STORE_DAMAGED = Gauge(
    "crystalmesh_store_damaged",
    "1 once a database file of this node was found damaged at run time (its writes are stopped).",
    ("store",), registry=REGISTRY,
)
LAST_BACKUP = Gauge(
    "crystalmesh_last_backup_timestamp_seconds",
    "Unix time of this node's last scheduled backup written (node/ops/schedule.py).",
    registry=REGISTRY,
)


def count_accepted(topic: str, issued_at_ms: int) -> None:
    """One gossip message accepted on ``topic``, and how long it travelled."""
    import time

    GOSSIP_MESSAGES.labels(topic=topic, outcome="accepted", reason="").inc()
    GOSSIP_LATENCY.labels(topic=topic).observe(max(0, time.time_ns() // 1_000_000 - issued_at_ms) / 1000)
