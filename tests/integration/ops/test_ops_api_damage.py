"""Issue 30: a running node that meets a damaged page says so through its API, status and
metrics, and stops writing to that store (a real NodeService and its HTTP API)."""

from __future__ import annotations

import sqlite3

import httpx

from node.service import NodeService


def http(node: NodeService) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=30,
                             headers={"authorization": f"Bearer {node.api_token}"})


async def test_damage_met_at_run_time_is_said_and_stops_writes(node: NodeService) -> None:
    for number in range(200):
        await node.memory.add(f"observation {number}: the batch job {number} ran long " + "x" * 300)
    db = node.memory.db
    await node.memory.run(lambda: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    await node.memory.run(lambda: db.execute("PRAGMA cache_size=0").fetchall())
    path = node.config.db_path
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    pages = [row[0] for row in conn.execute(
        "SELECT pageno FROM dbstat WHERE name = 'crystals' AND pagetype = 'leaf' ORDER BY pageno")]
    conn.close()
    with open(path, "r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * 4096)
        handle.write(b"\xa5" * 4096)

    async with http(node) as client:
        listed = await client.get("/v1/crystals", params={"limit": 500})
        assert listed.status_code == 503, listed.text
        assert listed.json()["code"] == "store_damaged" and "crystals.db is damaged" in listed.text
        status = await client.get("/v1/status")
        assert status.status_code == 200
        assert status.json()["stores"]["crystals.db"].startswith("damaged: ")
        added = await client.post("/v1/crystals", json={"text": "one more note"})
        assert added.status_code == 503 and "writes to it are stopped" in added.text
        metrics = (await client.get("/metrics")).text
    assert 'crystalmesh_store_damaged{store="crystals.db"} 1.0' in metrics
