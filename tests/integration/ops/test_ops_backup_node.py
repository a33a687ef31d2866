"""Issue 30: a backup taken while a node runs and writes restores, on a fresh data dir, to
the same node: the same peer id and wallet, the same search results, the same sales,
purchases and settlements. Two real nodes (NodeService, libp2p, API) and an eth-tester
chain in one trio run (tests/support/market.py)."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from node.cli.main import main
from node.config import load_config
from node.keys import load_identity
from node.memory import Memory, SearchRequest
from node.ops import restore_backup, take_backup
from node.service import NodeService
from tests.support.market import Market
from tests.support.wait import wait_until_async

PASSPHRASE = b"a long passphrase for the test backup"
SKILL = ("Rotate a leaked API key: revoke it, issue a new one, roll it out to every service, "
         "then search the logs for use of the old key")
# Memories each with its own answer, and a query for each. (The writer's notes differ only
# by a number: their order is a tie broken by scores that move with time and the in-memory
# hormonal state, which a backup carries only as last saved.)
DISTINCT = {
    "VPN certificate expires renew": "The VPN certificate expires on the first of March; renew it a week before",
    "Postgres replica lag alerts": "Postgres replica lag alerts fire above thirty seconds of delay",
    "release train leaves every Tuesday": "The release train leaves every Tuesday at noon, frozen the evening before",
    "rotate a leaked API key": SKILL,
}


def rows(db: Path, table: str, order: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    finally:
        conn.close()


def ledgers(data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {"sales": rows(data_dir / "crystals.db", "sales", "rowid"),
            "purchases": rows(data_dir / "crystals.db", "purchases", "rowid"),
            "settlements": rows(data_dir / "settlements.db", "settlements", "authorizer, nonce")}


async def live_search(node: NodeService, query: str) -> list[str]:
    return [hit.crystal.id for hit in await node.memory.search(SearchRequest(query, k=5, record_access=False))]


def restored_search(data_dir: Path, query: str) -> list[str]:
    memory = Memory(load_config(data_dir, environ={}))
    try:
        return [hit.crystal.id for hit in memory.search(SearchRequest(query, k=5, record_access=False))]
    finally:
        memory.close()


def same_identity(node: NodeService, data_dir: Path) -> None:
    from node.chain import load_wallet

    config = load_config(data_dir, environ={})
    assert load_identity(config).peer_id == node.identity.peer_id
    assert load_wallet(config.wallet_path).address == node.wallet_address


@pytest.mark.trio
async def test_backup_under_load_restores_the_same_node(
        market: Market, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in DISTINCT.values():
        if text != SKILL:
            await market.seller.memory.add(text)
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    bought = await market.buyer.market.buy(listing["listing_id"])
    seller = market.seller
    acknowledged: list[int] = []
    stop = trio.Event()

    async def write() -> None:
        while not stop.is_set():
            number = len(acknowledged)
            await seller.memory.add(f"load note {number} about the cache warm-up of shard {number}")
            acknowledged.append(number)

    archive = tmp_path / "seller.cmbackup"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await wait_until_async(lambda: len(acknowledged) >= 5, 60, "the writer to get going")
        before = len(acknowledged)
        await trio.to_thread.run_sync(functools.partial(
            take_backup, seller.config.data_dir, archive, PASSPHRASE, peer_id=seller.identity.peer_id))
        after = len(acknowledged)
        stop.set()
    assert after > before, (before, after)  # the node wrote while the backup ran

    under_load = tmp_path / "restored-under-load"
    await trio.to_thread.run_sync(restore_backup, archive, under_load, PASSPHRASE)
    same_identity(seller, under_load)
    # One consistent snapshot: the notes in it are exactly the first k the writer wrote.
    conn = sqlite3.connect(under_load / "crystals.db")
    numbers = sorted(int(re.match(r"load note (\d+) ", text).group(1))  # type: ignore[union-attr]
                     for (text,) in conn.execute("SELECT text FROM crystals WHERE text LIKE 'load note %'"))
    conn.close()
    assert before <= len(numbers) <= after + 1 and numbers == list(range(len(numbers))), (before, len(numbers), after)
    assert ledgers(under_load) == ledgers(seller.config.data_dir)
    assert [row for row in ledgers(under_load)["sales"] if bought["tx_hash"] in row]

    # Idle now: a second backup, of seller and buyer, restores to nodes that answer the same.
    for node in (seller, market.buyer):
        idle = tmp_path / f"{node.config.name}-idle.cmbackup"
        await trio.to_thread.run_sync(take_backup, node.config.data_dir, idle, PASSPHRASE)
        target = tmp_path / f"restored-{node.config.name}"
        await trio.to_thread.run_sync(restore_backup, idle, target, PASSPHRASE)
        same_identity(node, target)
        assert ledgers(target) == ledgers(node.config.data_dir)
        for query in DISTINCT:
            restored, live = await trio.to_thread.run_sync(restored_search, target, query), await live_search(node, query)
            assert restored[:1] == live[:1], (query, restored, live)
            if node is seller:
                assert (await node.memory.get(live[0])).text == DISTINCT[query]
            else:
                assert restored == live  # the buyer holds a few crystals, each its own answer
    assert [row for row in ledgers(tmp_path / "restored-buyer")["purchases"] if bought["tx_hash"] in row]

    # doctor on the running seller: its files, and what the node says (API) about itself.
    capsys.readouterr()
    code = await trio.to_thread.run_sync(main, ["--data-dir", str(seller.config.data_dir), "--json", "doctor"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    findings = {finding["check"]: finding for finding in report["findings"]}
    assert findings["running crystals.db"]["verdict"] == "ok"
    assert findings["running settlements.db"]["verdict"] == "ok"
    assert findings["peers"]["detail"] == "1 connected"
    assert findings["chain"]["verdict"] == "ok"
