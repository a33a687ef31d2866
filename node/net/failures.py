"""Routine network failures: counted in ``/metrics``, logged at debug, never stderr noise.

A peer going away mid-stream, a dial to an address nobody listens on any more,
a stream reset, a DHT peer that sends half a message: a network does this all
day, and none of it needs an operator. py-libp2p 0.8.1 logs several of these
at WARNING or ERROR (``Failed to read DHT message from stream:`` alone printed
240 lines in a 10-node, 40-second run). ``install()`` puts a filter on each
library logger concerned (``ROUTINE``: logger name -> message prefixes and
the kind they count as) that counts the record in
``crystalmesh_network_failures_total{kind=...}`` and lowers it to DEBUG, so it
is printed only when that logger is enabled for debug (``crystalmesh run
--debug``). Any other record, including every protocol violation the library
reports, passes unchanged. Our own code counts with ``count(kind)`` and logs
such events at debug.

Python logging runs a logger's filters only for records logged on that exact
logger, so the table names the library's modules one by one.
"""

from __future__ import annotations

import logging

from node import metrics

DIAL = "dial"
DHT_STREAM = "dht_stream"
DHT_QUERY = "dht_query"
DHT_LOOKUP = "dht_lookup"
STREAM_OPEN = "stream_open"
STREAM_RESET = "stream_reset"
STREAM_REFUSED = "stream_refused"
CONNECTION = "connection"

ROUTINE: dict[str, tuple[tuple[str, str], ...]] = {
    "libp2p.kad_dht.kad_dht": (
        ("Failed to read DHT message from stream", DHT_STREAM),
        ("Incomplete DHT message from stream", DHT_STREAM),
        ("DHT message too large", DHT_STREAM),
        ("Failed to parse protobuf message", DHT_STREAM),
        ("Error handling DHT stream", DHT_STREAM),
    ),
    "libp2p.kad_dht.peer_routing": (
        ("Failed to open stream to", DHT_QUERY),
        ("Error searching for peer", DHT_QUERY),
    ),
    "libp2p.host.basic_host": (
        ("Failed to open stream to peer", STREAM_OPEN),
    ),
    "libp2p.protocol_muxer.multiselect_client": (
        ("MultiselectClient handshake: write failed", STREAM_OPEN),
        ("MultiselectClient handshake: read failed", STREAM_OPEN),
    ),
    "libp2p.network.swarm": (
        ("failed to upgrade security", DIAL),
        ("fail to upgrade mux", DIAL),
        ("[ADDCONN_FAIL]", DIAL),
        ("Failed to establish replacement connection", DIAL),
        ("No known addresses to peer", DIAL),
        ("No addresses available for", DIAL),
        ("Error closing connection", CONNECTION),
    ),
    "libp2p.transport.tcp.tcp": (
        ("Failed to open TCP stream", DIAL),  # each of a dial's attempts, a peer that is down
    ),
    "libp2p.stream_muxer.yamux.yamux": (
        ("Yamux connection closed unexpectedly", CONNECTION),
        ("Yamux: timed out reading DATA frame body", CONNECTION),
        ("Incomplete read", STREAM_RESET),
        ("Error reading data for stream", STREAM_RESET),
        ("RawConnError during connection handling", CONNECTION),
        ("Error in handle_incoming", CONNECTION),
        ("Error closing secured_conn", CONNECTION),
    ),
}

_installed = False


def count(kind: str) -> None:
    """One routine failure of ``kind`` (a constant of this module)."""
    metrics.NETWORK_FAILURES.labels(kind=kind).inc()


class RoutineFailures(logging.Filter):
    """Counts a logger's routine failure records and lowers them to DEBUG."""

    def __init__(self, prefixes: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        for prefix, kind in self.prefixes:
            if message.startswith(prefix):
                count(kind)
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def install() -> None:
    """Attach the filters (idempotent; process-wide, as the library's loggers are)."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, prefixes in ROUTINE.items():
        logging.getLogger(name).addFilter(RoutineFailures(prefixes))
