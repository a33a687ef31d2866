"""Fixtures shared across the suite: a node config and a Memory in a temporary data dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.config import NodeConfig, load_config
from node.memory.facade import Memory

# Test data, not tests: the skill-scan corpus holds published skills' own test files
# (e.g. a security skill's tests/test_patterns.py), which pytest would otherwise collect.
collect_ignore = ["data"]


@pytest.fixture
def node_config(tmp_path: Path) -> NodeConfig:
    """Defaults in a fresh data dir, with the fast hashing embedder and no env influence."""
    return load_config(
        tmp_path / "node", overrides={"memory": {"embedder": "hashing"}}, environ={}
    )


@pytest.fixture
def memory(node_config: NodeConfig) -> Iterator[Memory]:
    """An open ``Memory`` (hashing embedder) that is closed after the test."""
    opened = Memory(node_config)
    try:
        yield opened
    finally:
        opened.close()


# Node processes the e2e tests start pay with ``exact`` (what their assertions are about);
# the voucher tests turn vouchers on for their own nodes.
os.environ.setdefault("CRYSTALMESH_MARKET_VOUCHERS", "false")


@pytest.fixture(autouse=True, scope="session")
def _private_crystalmesh_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the suite away from the user's ~/.crystalmesh (devnet pointer, default node)."""
    import os

    previous = os.environ.get("CRYSTALMESH_HOME")
    os.environ["CRYSTALMESH_HOME"] = str(tmp_path_factory.mktemp("crystalmesh-home"))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CRYSTALMESH_HOME", None)
        else:
            os.environ["CRYSTALMESH_HOME"] = previous
