"""Issue 26 delivery 5: a seller publishes a catalogue of 200 skills (real nodes over libp2p,
``tests/support/market.py``). Before, the 31st announcement failed on the seller's own node
(``rate_limited``: listings 10/min, burst 30 per origin). Now ``POST /v1/skills/publish`` (the
route `skill publish --all` and the MCP tool call) carries them in signed batches of up to 128
listings, every node online takes all 200, and a node that joins later gets the whole
catalogue through listings sync."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from node.service import NodeService
from tests.support.cli import Cli
from tests.support.market import WAIT_S, Market
from tests.support.wait import wait_until_async

pytestmark = pytest.mark.slow

CATALOGUE = 200
log = logging.getLogger(__name__)


async def add_skills(seller: NodeService, count: int, first: int = 0) -> list[str]:
    ids = []
    for index in range(first, first + count):
        crystal = await seller.memory.add_from_request({
            "text": f"Catalogue skill {index}: restore service {index} from its last snapshot, "
                    f"replay the write-ahead log and verify checksum {index * 7919}",
            "type": "skill", "scope": "public", "category": "ops", "tags": ["ops"]})
        for _ in range(seller.config.market.min_executions):
            await seller.market.record_execution(crystal.id, True, 0.9)
        ids.append(crystal.id)
    return ids


async def holds_all(node: NodeService, listing_ids: set[str]) -> bool:
    held = {item["listing_id"] for item in await node.market.list_listings()}
    return listing_ids <= held


async def test_a_catalogue_of_200_skills_reaches_every_node_and_late_joiners(
        market: Market, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = await market.add_buyer(tmp_path, "other")
    crystal_ids = await add_skills(market.seller, CATALOGUE)

    started = trio.current_time()
    published: list[dict[str, Any]] = []
    calls = 0
    async with market.http(market.seller) as http:
        while True:  # as `crystalmesh skill publish --all` does, one signed batch per call
            response = await http.post("/v1/skills/publish", json={"all": True, "limit": 128})
            assert response.status_code == 200, response.text
            answer = response.json()
            assert answer["failed"] == [] and answer["batches"] >= 1
            published += answer["published"]
            calls += 1
            if answer["remaining"] == 0:
                break
    assert calls == 2 and sorted(item["crystal_id"] for item in published) == sorted(crystal_ids)
    listing_ids = {item["listing_id"] for item in published}

    for node in (market.buyer, other):
        await wait_until_async(lambda node=node: holds_all(node, listing_ids),  # type: ignore[misc]
                               WAIT_S, f"200 listings on {node.config.name}")
    reached_s = trio.current_time() - started
    log.warning("catalogue of %d skills on every online node after %.2f s", CATALOGUE, reached_s)

    # Nothing is left to publish: `--all` again lists nothing twice.
    again = await market.seller.market_liveness.publish_skills(None, 128)
    assert again == {"published": [], "failed": [], "batches": 0, "remaining": 0}

    # The CLI: several ids, then --all, against the running seller (its blocking HTTP client
    # in a worker thread).
    cli = Cli(capsys, market.seller.config.data_dir)
    more = await add_skills(market.seller, 3, first=CATALOGUE)
    by_ids = await trio.to_thread.run_sync(cli.json, "skill", "publish", more[0], more[1])
    assert [item["crystal_id"] for item in by_ids["published"]] == more[:2]
    code, out, err = await trio.to_thread.run_sync(cli.run, "skill", "publish", "--all")
    assert code == 0 and "listed 1 skills" in out and "published 1 (failed 0, 0 to go)" in err

    # The MCP tool an agent calls, over the same API.
    from node.agent.mcp_server import build_server
    from node.api.client import ApiClient

    seller = market.seller
    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{seller.api_port}", seller.api_token))
    mcp_skills = await add_skills(seller, 2, first=CATALOGUE + 3)
    answer = await server.call_tool("skill_publish_catalogue", {"crystal_ids": mcp_skills})
    assert answer.structured_content is not None
    assert [item["crystal_id"] for item in answer.structured_content["published"]] == mcp_skills

    # Gossipsub would still hand a newcomer the batches it holds for IWANT: join after they
    # left every node's message cache (a newcomer meets them all, through peer exchange and
    # discovery), so only listings sync can bring the catalogue.
    async def batches_forgotten() -> bool:
        return not any(b"listing_batch" in message.data
                       for node in (market.seller, market.buyer, other)
                       for message in node.net.router.mcache.msgs.values())

    await wait_until_async(batches_forgotten, WAIT_S, "the batches to leave the seller's gossip cache")
    late = await market.add_buyer(tmp_path, "late")
    await wait_until_async(lambda: holds_all(late, listing_ids), WAIT_S, "200 listings on the late joiner")
    # The listings came by sync: sessions with several peers run at once and each reports
    # when it ends, so wait for the reports rather than read them at the last listing.
    await wait_until_async(
        lambda: sum(report.accepted for report in late.net.sync.reports) >= CATALOGUE, WAIT_S,
        "listings sync sessions that brought the catalogue")
