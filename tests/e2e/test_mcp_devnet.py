"""`crystalmesh mcp` driven by the official MCP SDK's client over stdio, against real nodes
on a devnet (anvil + node processes): memory tools, market search, a capped purchase,
and errors that arrive as MCP tool errors, never tracebacks."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.devnet import Devnet
from tests.e2e.test_market_devnet import known_everywhere, publish, usdc

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SELLER, AGENT = "node-1", "node-2"
SKILL = ("Recover a wedged Postgres replica: stop the replica, take a fresh pg_basebackup from the "
         "primary, restore the recovery signal file and restart with hot standby on")
REQUIRED_TOOLS = {"memory_search", "memory_add", "memory_get", "market_search", "skill_buy",
                  "skill_publish", "weather_status", "wallet_balance"}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("mcp") / "devnet", 2) as net:
        yield net


@asynccontextmanager
async def mcp_session(*node_args: str) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "node.cli.main", *node_args, "mcp"],
        env=dict(os.environ) | {"PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {text_of(result)}"
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def test_agent_uses_memory_and_buys_within_its_cap(devnet: Devnet) -> None:
    listing = publish(devnet, SELLER, SKILL)
    known_everywhere(devnet, listing["listing_id"], names=(AGENT,))
    price = listing["price_micro_usdc"]

    async with mcp_session("--dir", str(devnet.dir), "--node", AGENT) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) >= REQUIRED_TOOLS
        assert all(tools[name].description for name in REQUIRED_TOOLS)
        assert tools["memory_add"].input_schema["required"] == ["text"]

        added = await call(session, "memory_add", text="The staging cluster runs in eu-west-3 since May",
                           type="fact")
        hits = (await call(session, "memory_search", query="where does staging run"))["hits"]
        assert hits and hits[0]["id"] == added["id"]
        detail = await call(session, "memory_get", id=added["id"])
        assert detail["text"].startswith("The staging cluster") and detail["type"] == "fact"

        found = (await call(session, "market_search", query="postgres replica is stuck"))["listings"]
        assert found and found[0]["listing_id"] == listing["listing_id"]
        assert found[0]["price_usdc"] == price / 1_000_000

        before = usdc(devnet, AGENT)
        too_cheap = await session.call_tool(
            "skill_buy", {"listing_id": listing["listing_id"], "max_price_usdc": (price - 1) / 1_000_000})
        assert too_cheap.is_error and "Traceback" not in text_of(too_cheap)
        assert usdc(devnet, AGENT) == before

        bought = await call(session, "skill_buy", listing_id=listing["listing_id"],
                            max_price_usdc=price / 1_000_000)
        assert bought["price_micro_usdc"] == price and bought["price_usdc"] == price / 1_000_000
        assert usdc(devnet, AGENT) == before - price

        wallet = await call(session, "wallet_balance")
        assert int(wallet["usdc_micro"]) == before - price
        weather = await call(session, "weather_status")
        assert weather["halt_untrusted_ingestion"] is False

        missing = await session.call_tool("memory_get", {"id": "no-such-memory"})
        assert missing.is_error and "Traceback" not in text_of(missing)
        invalid = await session.call_tool("memory_search", {"query": ""})
        assert invalid.is_error


async def test_no_node_running_is_a_tool_error(tmp_path: Path) -> None:
    async with mcp_session("--data-dir", str(tmp_path / "nothing")) as session:
        result = await session.call_tool("memory_search", {"query": "anything"})
        assert result.is_error
        assert "no crystalmesh node is running" in text_of(result)
        assert "Traceback" not in text_of(result)
