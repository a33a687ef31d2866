"""An agent that speaks only MCP closes the whole skill loop on two real nodes (tests/support/market.py).

The seller's agent crystallizes an emerging skill, records three runs, publishes it and
re-prices it; the buyer's agent buys it, reads it as a ``skill://`` resource whose digest
matches the SEP-2640 entry, reports that it was bad, and the seller's trust on the buyer
drops exactly as ``crystalmesh skill record-execution`` on the bought skill makes it drop.
Each agent is the official Python SDK's ``Client`` connected in-process to the server
``crystalmesh mcp`` runs, which calls its node over the local HTTP API.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import trio
from mcp import Client
from mcp_types import Request, RequestParams, TextResourceContents
from pydantic import TypeAdapter

from node.agent import build_server
from node.api import ApiClient
from node.service import NodeService
from tests.support.market import WAIT_S, Market
from tests.support.wait import wait_until_async

pytestmark = pytest.mark.slow

PATTERN = ("When a Postgres replica stops replaying WAL: stop it, pg_basebackup from the primary, "
           "restore standby.signal, start it with hot standby on")


def agent(node: NodeService) -> Client:
    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    return Client(server)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {result.content}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return " ".join(getattr(block, "text", "") for block in result.content)


async def skills_list(client: Client) -> list[dict[str, Any]]:
    raw = await client.session.send_request(Request(method="skills/list", params=RequestParams()),
                                            TypeAdapter(dict[str, Any]))
    assert raw["resultType"] == "complete"
    return list(raw["skills"])


async def read(client: Client, uri: str) -> str:
    content = (await client.read_resource(uri)).contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text


async def test_an_mcp_agent_sells_a_skill_it_learned_and_a_buyer_reports_it_bad(market: Market) -> None:
    seller, buyer = market.seller, market.buyer
    async with agent(seller) as selling:
        capabilities = selling.session.server_capabilities
        assert capabilities is not None and capabilities.extensions is not None
        assert "io.modelcontextprotocol/skills" in capabilities.extensions  # SEP-2640, declared
        tools = {tool.name: tool for tool in (await selling.list_tools()).tools}
        for name in ("skill_record_execution", "skill_crystallize", "bounty_post", "bounty_list",
                     "bounty_fulfil", "listing_reprice", "listing_unpublish", "skill_report_outcome"):
            assert "Costs" in (tools[name].description or "") or "COSTS" in (tools[name].description or "")

        pattern = await call(selling, "memory_add", text=PATTERN, type="task_pattern", scope="public")
        skill = await call(selling, "skill_crystallize", crystal_id=pattern["id"], category="db",
                           tags=["postgres"])
        assert skill["executions"] == 0
        first = await call(selling, "skill_record_execution", crystal_id=skill["id"], success=True,
                           reward=0.9, note="replica back in 4 minutes")
        assert first["executions"] == 1 and first["confidence"] == 1.0
        assert "3" in await refused(selling, "skill_publish", crystal_id=skill["id"])  # the gate
        for _ in range(2):
            await call(selling, "skill_record_execution", crystal_id=skill["id"], success=True, reward=0.9)
        detail = await call(selling, "memory_get", id=skill["id"])
        notes = [row.get("detail", {}).get("note") for row in detail["audit"] if row.get("action") == "execution"]
        assert "replica back in 4 minutes" in notes

        # The agent's own skill as a SEP-2640 resource, listed with a digest that matches its bytes.
        entries = await skills_list(selling)
        own = next(entry for entry in entries if entry["_meta"]["io.crystalmesh/crystalId"] == skill["id"])
        assert own["uri"].startswith("skill://") and own["uri"].endswith("/SKILL.md")
        assert not own["uri"].startswith("skill://bought/")
        served = await read(selling, own["uri"])
        assert own["resources"][0] == {"uri": own["uri"], "size": len(served.encode()),
                                       "digest": "sha256:" + hashlib.sha256(served.encode()).hexdigest()}
        assert own["uri"] in {str(resource.uri) for resource in (await selling.list_resources()).resources}

        listing = await call(selling, "skill_publish", crystal_id=skill["id"])
        repriced = await call(selling, "listing_reprice", listing_id=listing["listing_id"], price_usdc=0.02)
        assert repriced["price_micro_usdc"] == 20_000 and repriced["price_usdc"] == 0.02

    await market.known_to_buyer(listing)

    async def buyer_sees_price(price: int) -> bool:
        held = await buyer.memory.run(buyer.listings.get, listing["listing_id"])
        return held is not None and held.listing.price_micro_usdc == price

    await wait_until_async(lambda: buyer_sees_price(20_000), WAIT_S, "the new price on the buyer")
    before = await market.balances()
    async with agent(buyer) as buying:
        bounty = await call(buying, "bounty_post", text="need: a skill that recovers a postgres replica",
                            reward_usdc=0.05)
        assert bounty["reward_micro_usdc"] == 50_000
        listed = (await call(buying, "bounty_list"))["bounties"]
        assert [item["bounty_id"] for item in listed] == [bounty["bounty_id"]]
        fulfilled = await call(buying, "bounty_fulfil", bounty_id=bounty["bounty_id"])
        assert fulfilled["fulfilled_by"] == listing["listing_id"]
        assert fulfilled["purchase"]["price_micro_usdc"] == 20_000
        assert await market.balances() == (before[0] + 20_000, before[1] - 20_000)
        assert [sale["listing_id"] for sale in await seller.market.sales(10)] == [listing["listing_id"]]

        bought = next(entry for entry in await skills_list(buying)
                      if entry["_meta"].get("io.crystalmesh/listingId") == listing["listing_id"])
        assert bought["uri"].startswith("skill://bought/")
        text = await read(buying, bought["uri"])
        assert f"tx={fulfilled['purchase']['tx_hash']}" in text and "pg_basebackup" in text
        assert bought["resources"][0]["digest"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()

        seller_key = seller.identity.public_key.hex()
        trust_before = next(row for row in buyer.trust.show() if row["peer_key"] == seller_key)
        report = await call(buying, "skill_report_outcome", skill=listing["listing_id"], success=False,
                            note="it wiped the data directory")
        crystal_id = fulfilled["purchase"]["crystal_id"]
        assert (report["seller_key"], report["crystal_id"], report["success"]) == (seller_key, crystal_id, False)
        assert report["seller_trust"]["events"] == trust_before["events"] + 1
        assert report["seller_trust"]["last_reason"] == f"execution_failure: {crystal_id}"
        # The failure taught the buyer's memory too: from the market's 0.2 down a fifth (issue 35).
        assert (report["confidence_before"], report["confidence"]) == (0.2, 0.16)
        assert "neither" in await refused(buying, "skill_report_outcome", skill=bounty["bounty_id"],
                                          success=False)
    after_mcp = next(row for row in buyer.trust.show() if row["peer_key"] == seller_key)
    assert after_mcp["local_raw"] < trust_before["local_raw"]

    # The CLI's path (`crystalmesh skill record-execution` on the bought skill) moves it the same way.
    cli_client = ApiClient(f"http://127.0.0.1:{buyer.api_port}", buyer.api_token)
    try:
        await trio.to_thread.run_sync(lambda: cli_client.record_execution(crystal_id, False))
    finally:
        cli_client.close()
    after_cli = next(row for row in buyer.trust.show() if row["peer_key"] == seller_key)
    assert after_cli["events"] == after_mcp["events"] + 1
    assert after_cli["last_reason"] == after_mcp["last_reason"]
    assert after_cli["local_raw"] < after_mcp["local_raw"]

    async with agent(seller) as selling:
        await call(selling, "listing_unpublish", listing_id=listing["listing_id"])

    async def withdrawn() -> bool:
        return not any(item["listing_id"] == listing["listing_id"]
                       for item in await buyer.market.list_listings())

    await wait_until_async(withdrawn, WAIT_S, "the withdrawal on the buyer")


async def test_skill_buy_reports_the_purchase_as_it_goes(market: Market) -> None:
    """Progress of a purchase: one call to the node, watched through its purchase row."""
    listing = await market.publish("Rotate the ingress TLS certificates: issue with ACME, reload")
    await market.known_to_buyer(listing)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{market.buyer.api_port}",
                                            market.buyer.api_token), heartbeat_s=0.02)
    async with Client(server) as buying:
        result = await buying.call_tool("skill_buy", {"listing_id": listing["listing_id"], "max_price_usdc": 1.0},
                                        progress_callback=on_progress)
    assert not result.is_error, result.content
    assert seen[0] == (0, 5, "terms: asking the seller")
    assert seen[-1] == (5, 5, "stored in memory")
    values = [progress for progress, _, _ in seen]
    assert values == sorted(set(values))  # strictly increasing, as the protocol requires
    # The buyer's purchase row says "authorized" for as long as the seller settles on chain (far
    # longer than a heartbeat), so the payment step is heard while the one call is under way.
    assert any((message or "").startswith("payment: authorizing USDC") for _, _, message in seen), seen
