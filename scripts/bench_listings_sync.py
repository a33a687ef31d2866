#!/usr/bin/env python3
"""Late-joiner catch-up: how long until a node started after N listings exist has all N.

Two whole nodes (``NodeService``: SQLite, listing book, lifecycle, trust, API,
real py-libp2p hosts on loopback) in one trio run. The old node takes N signed
listings from N/10 sellers through its gossip validator and handler (as if
gossiped); then a late node bootstrapped to it is started and the clock runs
until its listing book holds all N (listings sync, ``/crystalmesh/listings-sync/1``).
Reported per N: from the late node's start, and from its first connection.
Baseline in the same process: the same start with N = 0 (node start + connect
+ an empty sync), so the ratio is the cost of the listings themselves.

    .venv/bin/python scripts/bench_listings_sync.py --sizes 200,1000

Last line: one JSON object. ``--smoke``: N = 20.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

# tests/ is not an installed package: the listing builder is read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, print_result, smoke

from node.config import load_config
from node.init import init_node
from node.service import NodeService
from protocol.envelope import seal
from protocol.identity import Identity
from protocol.messages import SkillListing
from protocol.topics import SKILLS
from tests.support.net import make_listing


def node(root: Path, name: str, bootstrap: list[str]) -> NodeService:
    init_node(root / name, name=name, embedder="hashing", listen="/ip4/127.0.0.1/tcp/0",
              api_port=0, bootstrap=bootstrap)
    return NodeService(load_config(root / name, environ={}))


async def catch_up(root: Path, count: int) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        old = node(root, f"old-{count}", [])
        await nursery.start(old.run)
        issued = time.time_ns() // 1_000_000 - 30_000
        sellers = [Identity.generate() for _ in range((count + 9) // 10)]
        for index in range(count):
            seller = sellers[index // 10]
            listing = make_listing(seller, name=f"skill-{index}", now_ms=issued)
            data = seal(seller, SkillListing.KIND, listing, issued * 1000 + index, issued)
            await old.intake.take(old.net.validator.check(SKILLS, data, "bench"))
        assert await old.memory.run(old.listings.count) == count
        started = trio.current_time()
        late = node(root, f"late-{count}", [old.net.listen_addrs()[0]])
        await nursery.start(late.run)
        connected = None
        with trio.fail_after(300):
            while True:
                if connected is None and late.net.connected_peers():
                    connected = trio.current_time()
                have = await late.memory.run(late.listings.count)
                sessions = late.net.sync_status()["sessions"]
                if have >= count and sessions:
                    break
                await trio.sleep(0.005)
        done = trio.current_time()
        nursery.cancel_scope.cancel()
    assert connected is not None
    return {"listings": count, "from_start_s": round(done - started, 3),
            "from_connect_s": round(done - connected, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,1000")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), sizes="20")
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        baseline = trio.run(catch_up, root, 0)
        runs = [trio.run(catch_up, root, size) for size in sizes]
    print(f"baseline (0 listings): {baseline['from_start_s']:.3f} s from start, "
          f"{baseline['from_connect_s']:.3f} s from connect")
    for run in runs:
        rate = run["listings"] / max(run["from_connect_s"], 1e-9)
        run["listings_per_s_after_connect"] = round(rate, 1)
        run["ratio_to_baseline"] = round(run["from_start_s"] / baseline["from_start_s"], 2)
        print(f"{run['listings']} listings: {run['from_start_s']:.3f} s from start "
              f"({run['ratio_to_baseline']}x baseline), {run['from_connect_s']:.3f} s from connect "
              f"= {rate:.0f} listings/s")
    print_result({"baseline": baseline, "runs": runs})


if __name__ == "__main__":
    main()
