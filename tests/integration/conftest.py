"""Shared integration fixtures: the market's in-process nodes (``tests/support/market.py``),
the retrieval set in a real MiniLM store, the CLI against a temporary data dir, and one
running node (``node``: hashing embedder, its API on a free loopback port).

A module that defines its own ``chain`` or ``node`` (the chain tests, a node with settings of
its own) overrides this one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from node.chain.embedded import EmbeddedChain, start_embedded_chain
from node.config import load_config
from node.init import init_node
from node.memory.facade import Memory
from node.service import NodeService
from tests.support.cli import Cli, isolate_home
from tests.support.market import Market, start_market


@pytest.fixture(scope="module")
def chain() -> Iterator[EmbeddedChain]:
    """One eth-tester chain per test module."""
    yield start_embedded_chain(n_accounts=1)


@pytest.fixture
async def market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> Market:
    """A fresh seller + buyer pair on that chain, connected over libp2p."""
    return await start_market(tmp_path, chain, nursery)


RETRIEVAL_V2 = Path(__file__).resolve().parents[1] / "data" / "retrieval_v2.json"


@pytest.fixture(scope="module")
def retrieval_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """The 412 memories of tests/data/retrieval_v2.json in a real store and index, embedded with MiniLM."""
    data_dir = tmp_path_factory.mktemp("retrieval") / "node"
    memory = Memory(load_config(data_dir, overrides={"memory": {"embedder": "minilm"}}, environ={}))
    memories = json.loads(RETRIEVAL_V2.read_text())["memories"]
    memory.add_crystals([memory.prepare(item["text"]) for item in memories])
    try:
        yield memory
    finally:
        memory.close()


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and CRYSTALMESH_HOME inside tmp_path (the CLI tests use it for every test)."""
    return isolate_home(tmp_path, monkeypatch)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The data dir the ``cli`` fixture runs against (not created)."""
    return tmp_path / "node"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], data_dir: Path) -> Cli:
    """The real ``crystalmesh`` CLI, in-process, against ``data_dir``."""
    return Cli(capsys, data_dir)


@pytest.fixture
def initialised(cli: Cli) -> Cli:
    """``cli`` after ``crystalmesh init --embedder hashing``."""
    summary = cli.json("init", "--embedder", "hashing")
    assert summary["created"] and summary["embedder"] == "hashing"
    return cli


@pytest.fixture
async def node(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[NodeService]:
    """A node running in this test's trio run (hashing embedder; no peers configured)."""
    init_node(tmp_path / "node", name="agent", embedder="hashing")
    service = NodeService(load_config(tmp_path / "node", environ={}))
    await nursery.start(service.run)
    yield service
