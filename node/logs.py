"""Logging for a running node: one line per event, key=value fields, to stderr.

``devnet up`` points each node's stderr at ``<data dir>/node.log``.
"""

from __future__ import annotations

import logging
import sys

from node.config import NodeConfig


def setup_logging(config: NodeConfig, debug: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s level=%(levelname)s node={config.name} logger=%(name)s %(message)s"
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    # libp2p is chatty at INFO (every stream open/close); keep its warnings.
    for noisy in ("libp2p", "multiaddr", "hypercorn.access", "web3", "urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if debug else logging.WARNING)
