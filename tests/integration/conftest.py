"""Fixtures of the market's in-process integration tests (``tests/integration/market_nodes.py``).

A module that defines its own ``chain`` (the chain tests do) overrides this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from node.chain.embedded import EmbeddedChain, start_embedded_chain
from tests.integration.market_nodes import Market, start_market


@pytest.fixture(scope="module")
def chain() -> Iterator[EmbeddedChain]:
    """One eth-tester chain per test module."""
    yield start_embedded_chain(n_accounts=1)


@pytest.fixture
async def market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> Market:
    """A fresh seller + buyer pair on that chain, connected over libp2p."""
    return await start_market(tmp_path, chain, nursery)
