"""`crystalmesh mcp` driven by the official MCP SDK's client over stdio, against real nodes
on a devnet (anvil + node processes): memory tools, market search, a capped purchase,
and errors that arrive as MCP tool errors, never tracebacks."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.devnet import Devnet, known_everywhere, publish, usdc

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SELLER, AGENT = "node-1", "node-2"
SKILL = ("Recover a wedged Postgres replica: stop the replica, take a fresh pg_basebackup from the "
         "primary, restore the recovery signal file and restart with hot standby on")
REQUIRED_TOOLS = {"memory_search", "memory_add", "memory_get", "memory_update", "memory_delete",
                  "memory_history", "memory_list", "market_search", "skill_buy", "skill_publish",
                  "skill_install", "weather_status", "wallet_balance", "wallet_channels"}
SKILL_MD = """---
name: pg-replica-recovery
description: Recover a wedged Postgres streaming replica. Use when a replica stops replaying WAL.
metadata:
  author: node-1
---
# Recover a wedged replica

1. Stop the replica.
2. Run scripts/resync.sh against the primary.
3. Start it again with hot standby on."""
RESYNC = "#!/bin/sh\npg_basebackup -h \"$PRIMARY\" -D /var/lib/postgresql/data -R\n"


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


async def test_agent_uses_memory_and_buys_within_its_cap(devnet: Devnet, tmp_path: Path) -> None:
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
        await call(session, "memory_add", text="The coffee machine on floor 3 is broken", type="fact")
        both = (await call(session, "memory_search", query="where does staging run"))["hits"]
        assert len(both) == 2 and both[0]["id"] == added["id"]
        assert 0.0 <= both[1]["relevance"] < both[0]["relevance"] <= 1.0
        above = (await call(session, "memory_search", query="where does staging run",
                            min_relevance=both[0]["relevance"]))["hits"]
        assert [hit["id"] for hit in above] == [added["id"]]
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

        # A plain-text skill installs too: a SKILL.md is written around it from the listing.
        plain = await call(session, "skill_install", skill=listing["listing_id"], to_dir=str(tmp_path))
        written = (tmp_path / plain["name"] / "SKILL.md").read_text()
        assert plain["bundle"] is False and f"tx={bought['tx_hash']}" in written and SKILL in written

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


async def test_agent_memory_in_two_namespaces_and_an_installed_skill(devnet: Devnet,
                                                                    tmp_path: Path) -> None:
    folder = tmp_path / "seller" / "pg-replica-recovery"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "scripts" / "resync.sh").write_text(RESYNC)
    crystal = devnet.cli_json("skill", "add", str(folder), "--category", "db", "--tag", "postgres",
                              node=SELLER)
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.9", node=SELLER)
    listing = devnet.cli_json("skill", "publish", crystal["id"], node=SELLER)
    known_everywhere(devnet, listing["listing_id"], names=(AGENT,))
    shown = next(item for item in devnet.api(AGENT).get("/v1/listings")["listings"]
                 if item["listing_id"] == listing["listing_id"])
    assert (shown["name"], shown["description"]) == (  # peers see the front matter, not the body
        "pg-replica-recovery", "Recover a wedged Postgres streaming replica. Use when a replica stops "
        "replaying WAL.")
    assert "pg_basebackup" not in str(shown)

    async with mcp_session("--dir", str(devnet.dir), "--node", AGENT) as session:
        jonas = await call(session, "memory_add", text="Jonas deploys on Fridays only after 10:00",
                           namespace="user:jonas", type="preference")
        planner = await call(session, "memory_add", text="Jonas deploys on Fridays only after 10:00",
                             namespace="agent:planner", type="fact")
        assert jonas["outcome"] == planner["outcome"] == "created" and jonas["id"] != planner["id"]
        again = await call(session, "memory_add", text="Jonas deploys on Fridays only after 10:00",
                           namespace="user:jonas", type="preference", scope="public")
        assert again["outcome"] == "exists" and again["id"] == jonas["id"] and "scope" in again["differs"]

        async def found(namespace: str) -> list[str]:
            hits = (await call(session, "memory_search", query="when does Jonas deploy",
                               namespace=namespace))["hits"]
            return [hit["id"] for hit in hits]

        assert await found("user:jonas") == [jonas["id"]]
        assert await found("agent:planner") == [planner["id"]]

        updated = await call(session, "memory_update", id=jonas["id"],
                             text="Jonas deploys on Fridays only before noon")
        assert updated["version"] == 2 and updated["previous_id"] == jonas["id"]
        assert await found("user:jonas") == [updated["id"]]
        assert await found("agent:planner") == [planner["id"]]  # untouched by the other namespace
        history = await call(session, "memory_history", id=updated["id"])
        assert [v["id"] for v in history["versions"]] == [jonas["id"], updated["id"]]
        assert history["versions"][0]["valid_to"] == history["versions"][1]["valid_from"]
        assert {"created", "superseded", "updated"} <= {t["action"] for t in history["transitions"]}

        deleted = await call(session, "memory_delete", id=updated["id"])
        assert deleted["versions"] == 2
        assert await found("user:jonas") == []
        assert (await call(session, "memory_list", namespace="user:jonas"))["memories"] == []
        assert [m["id"] for m in (await call(session, "memory_list", namespace="agent:planner"))["memories"]] \
            == [planner["id"]]
        gone = await session.call_tool("memory_get", {"id": updated["id"]})
        assert gone.is_error and "Traceback" not in text_of(gone)
        assert (await call(session, "memory_history", id=jonas["id"]))["deleted"] is True
        bad = await session.call_tool("memory_add", {"text": "x", "namespace": "User/../x"})
        assert bad.is_error

        price = listing["price_micro_usdc"]
        before = usdc(devnet, AGENT)
        bought = await call(session, "skill_buy", listing_id=listing["listing_id"],
                            max_price_usdc=price / 1_000_000)
        assert bought["price_micro_usdc"] == price and usdc(devnet, AGENT) == before - price

        skills = tmp_path / "agent-skills"
        relative = await session.call_tool("skill_install", {"skill": listing["listing_id"],
                                                             "to_dir": "relative/dir"})
        assert relative.is_error
        installed = await call(session, "skill_install", skill=listing["listing_id"], to_dir=str(skills))
        skill_md = (skills / "pg-replica-recovery" / "SKILL.md").read_text()
        provenance = skill_md.split("---\n")[2].splitlines()[0]
        expected_hash = hashlib.sha256(crystal["text"].encode()).hexdigest()
        assert provenance == (f"<!-- crystalmesh: seller={bought['seller_key']} tx={bought['tx_hash']} "
                              f"sha256={expected_hash} listing={listing['listing_id']} -->")
        assert installed["content_hash"] == expected_hash == listing_content_hash(devnet, listing)
        assert (skills / "pg-replica-recovery" / "scripts" / "resync.sh").read_text() == RESYNC
        twice = await session.call_tool("skill_install", {"skill": listing["listing_id"],
                                                          "to_dir": str(skills)})
        assert twice.is_error and "already exists" in text_of(twice)

    # The CLI installs the same purchase, by listing or by the bought crystal's id.
    by_cli = devnet.cli_json("skill", "install", bought["crystal_id"], "--to", str(tmp_path / "cli"),
                             node=AGENT)
    assert (tmp_path / "cli" / "pg-replica-recovery" / "SKILL.md").read_text() == skill_md
    assert by_cli["tx_hash"] == bought["tx_hash"]


def listing_content_hash(devnet: Devnet, listing: dict[str, Any]) -> str:
    items = devnet.api(AGENT).get("/v1/listings")["listings"]
    return str(next(item["content_hash"] for item in items if item["listing_id"] == listing["listing_id"]))
