"""Fixtures shared across the suite: a node config and a Memory in a temporary data dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.config import NodeConfig, load_config
from node.crystals.memory import Memory


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
