"""``apply()``: every patch of the package, once per process, on the one py-libp2p they fit."""

from __future__ import annotations

import importlib.metadata

from node.net import failures
from node.net.libp2p_tuning import connections, frames, incoming, pubsub_receive, pubsub_send

_SUPPORTED_LIBP2P = "0.8.1"
_applied = False


def check_version(installed: str | None = None) -> None:
    """Refuse a py-libp2p other than the one these items were written for (the package doc)."""
    installed = installed or importlib.metadata.version("libp2p")
    if installed != _SUPPORTED_LIBP2P:
        raise RuntimeError(
            f"node.net.libp2p_tuning patches py-libp2p {_SUPPORTED_LIBP2P}, found {installed}: "
            "review every item of its modules' docstrings against the new version first"
        )


def apply() -> None:
    """Every item of the package, once per process (a host calls it when it is built)."""
    global _applied
    if _applied:
        return
    check_version()
    _applied = True
    failures.install()  # item 5
    frames.patch()
    incoming.patch()
    pubsub_receive.patch()
    pubsub_send.patch()
    connections.patch()
