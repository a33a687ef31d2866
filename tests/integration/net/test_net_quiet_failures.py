"""Routine network failures are counted in /metrics and never printed at the default log level
(real py-libp2p hosts; the node's own logging set-up writing to the captured stderr)."""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio
from libp2p.custom_types import TProtocol

from node import metrics
from node.config import NodeConfig
from node.logs import setup_logging
from node.net import failures
from protocol.identity import Identity
from protocol.topics import DHT_PROTOCOL
from tests.support.net import make_net
from tests.support.wait import wait_until_async


def counted(kind: str) -> float:
    return metrics.REGISTRY.get_sample_value(
        "crystalmesh_network_failures_total", {"kind": kind}) or 0.0


@contextmanager
def node_stderr(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """Everything that would reach the node's stderr, with logging set up as ``crystalmesh run``
    does (INFO, libp2p at WARNING). Two paths lead there: the root handler, and Python's
    last-resort handler, which prints bare messages for loggers without handlers, such as
    py-libp2p's (its ``libp2p`` logger does not propagate): that is where the
    ``Failed to read DHT message from stream:`` lines came from."""
    stderr = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    levels = {name: logging.getLogger(name).level for name in ("libp2p", "multiaddr")}
    # In a node process py-libp2p's logger has no handler; the test suite gives it pytest's.
    library = logging.getLogger("libp2p")
    library_handlers = library.handlers[:]
    library.handlers[:] = []
    setup_logging(NodeConfig(name="quiet"))
    for handler in root.handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(stderr)
    last_resort = logging.StreamHandler(stderr)
    last_resort.setLevel(logging.WARNING)
    monkeypatch.setattr(logging, "lastResort", last_resort)
    try:
        yield stderr
    finally:
        library.handlers[:] = library_handlers
        root.handlers[:], root.level = saved
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


async def test_dht_stream_hiccups_are_counted_and_silent(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    with node_stderr(monkeypatch) as stderr:
        await hiccups(nursery)
        logging.getLogger("node.net.test").warning("a real warning still shows")
        logging.getLogger("libp2p.kad_dht.kad_dht").warning("FIND_NODE with empty key, ignoring")
    err = stderr.getvalue()
    assert "a real warning still shows" in err and "FIND_NODE with empty key" in err
    assert "DHT message" not in err


async def hiccups(nursery: trio.Nursery) -> None:
    """A peer opens our DHT protocol three times and sends garbage; all three are counted."""
    ours = make_net()
    await nursery.start(ours.run)
    other = make_net(bootstrap=[ours.listen_addrs()[0]], discovery=False)
    await nursery.start(other.run)
    await wait_until_async(lambda: ours.peer_id in other.connected_peers(), 30, "connected")
    before = counted(failures.DHT_STREAM)

    # Half a message then EOF; a reset mid-length; a length over the 4 MiB limit.
    for data, reset in ((b"\x0aabc", False), (b"\x80", True), (b"\xff\xff\xff\xff\x0f", False)):
        stream = await other.host.new_stream(ours.host.get_id(), [TProtocol(DHT_PROTOCOL)])
        await stream.write(data)
        if reset:
            await stream.reset()
        else:
            await stream.close()
    await wait_until_async(lambda: counted(failures.DHT_STREAM) >= before + 3, 30,
                     "three DHT stream failures counted")


async def test_dialling_a_peer_that_is_down_is_counted_and_silent(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept peer that went away is redialled with backoff; py-libp2p logs each attempt of
    each dial at ERROR ("Failed to open TCP stream"): four lines a redial in a node's stderr."""
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    address = f"/ip4/127.0.0.1/tcp/{port}/p2p/{Identity.generate().peer_id}"
    with node_stderr(monkeypatch) as stderr:
        ours = make_net(bootstrap=[address], discovery=False)
        before = counted(failures.DIAL)
        await nursery.start(ours.run)
        await wait_until_async(lambda: ours.peer_manager.dial_attempts >= 2, 60, "two redials")
    assert "Failed to open TCP stream" not in stderr.getvalue()
    assert counted(failures.DIAL) >= before + 2


def test_a_routine_record_is_lowered_and_counted_and_others_pass() -> None:
    failures.install()
    logger = logging.getLogger("libp2p.kad_dht.kad_dht")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    logger.addHandler(handler)
    level = logger.level
    try:
        logger.setLevel(logging.WARNING)
        before = counted(failures.DHT_STREAM)
        logger.warning("Failed to read DHT message from stream: %s", "reset")
        assert counted(failures.DHT_STREAM) == before + 1
        assert seen == []  # lowered to DEBUG, which this logger does not print
        logger.setLevel(logging.DEBUG)
        logger.warning("Incomplete DHT message from stream: %s", "eof")
        assert [r.levelname for r in seen] == ["DEBUG"]
        logger.warning("FIND_NODE with empty key, ignoring")  # not routine: unchanged
        assert [r.levelname for r in seen] == ["DEBUG", "WARNING"]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


