"""One benchmark node (a NetService in its own process), driven by bench_gossip.py.

Talks JSON lines: commands on stdin, events on stdout. Not a user tool.

    -> {"cmd": "status"}                         <- {"event": "status", "mesh": n, "peers": n}
    -> {"cmd": "publish", "phase": k, "rate": r, "count": m}
                                                 <- {"event": "published", "phase": k, ...}
    -> {"cmd": "report", "phase": k, "full": b}  <- {"event": "report", "phase": k, "count": n,
                                                     "received": [[index, latency_us], ...],
                                                     "dropped": ...}
                                                     ("received" only when full is true;
                                                     the harness reads CPU from /proc)
    -> {"cmd": "quit"}
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import logging
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import trio

# tests/ is not an installed package: the listing builder is read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.config import NetConfig
from node.net.gossip_config import GossipConfig
from node.net.service import NetService
from protocol.envelope import Envelope, seal
from protocol.identity import Identity
from protocol.messages import SkillListing
from protocol.topics import SKILLS
from tests.support.net import make_listing


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Worker:
    def __init__(self, net: NetService) -> None:
        self.net = net
        # phase -> [(index, latency_us)]
        self.received: dict[int, list[tuple[int, int]]] = defaultdict(list)
        net.on_listing(self.on_listing)

    async def on_listing(self, envelope: Envelope) -> None:
        now_ns = time.time_ns()
        description = envelope.body.get("description", "")
        try:
            phase_text, index_text, sent_ns_text = description.split(":")
            phase, index, sent_ns = int(phase_text), int(index_text), int(sent_ns_text)
        except ValueError:
            return
        self.received[phase].append((index, (now_ns - sent_ns) // 1000))

    async def publish(self, phase: int, rate: float, count: int) -> dict[str, Any]:
        """``count`` listings at ``rate``/s from as many sellers as the shipped limits need.

        Every node accepts at most ``net.origin_listings_burst`` (30) listings at once from
        one origin key, so one key publishing hundreds is a flood, refused at the first
        validator (its own). The listings go out through this node's gossip, each sealed by
        a seller key of a fresh set of ``ceil(count / burst)`` keys that each stay within
        the burst: many sellers announcing through one node, every validator at its defaults.
        """
        per_seller = NetConfig().origin_listings_burst
        sellers = [Identity.generate() for _ in range(-(-count // per_seller))]
        now_ms = time.time_ns() // 1_000_000
        templates = [make_listing(seller, "bench", now_ms) for seller in sellers]
        start = trio.current_time()
        late = 0
        for index in range(count):
            due = start + index / rate
            now = trio.current_time()
            if due > now:
                await trio.sleep(due - now)
            elif now - due > 0.05:
                late += 1
            seller, seq = divmod(index, per_seller)
            issued_ms = time.time_ns() // 1_000_000
            listing = dataclasses.replace(
                templates[seller],
                description=f"{phase}:{index}:{time.time_ns()}",
                expires_at_ms=issued_ms + 86_400_000,
            )
            data = seal(sellers[seller], SkillListing.KIND, listing, seq + 1, issued_ms)
            await self.net.gossip.publish_sealed(SKILLS, data)
        elapsed = trio.current_time() - start
        return {"achieved_rate": count / elapsed if elapsed > 0 else 0.0, "late": late,
                "sellers": len(sellers)}

    async def serve(self) -> None:
        stdin = trio.wrap_file(sys.stdin)
        while True:
            line = await stdin.readline()
            if not line:
                return
            command = json.loads(line)
            name = command["cmd"]
            if name == "status":
                emit(
                    {
                        "event": "status",
                        "mesh": len(self.net.mesh_peers(SKILLS)),
                        "peers": len(self.net.connected_peers()),
                    }
                )
            elif name == "publish":
                result = await self.publish(command["phase"], command["rate"], command["count"])
                emit({"event": "published", "phase": command["phase"], **result})
            elif name == "report":
                phase = command["phase"]
                received = self.received.get(phase, [])
                report = {
                    "event": "report",
                    "phase": phase,
                    "count": len(received),
                    "dropped": self.net.gossip.dropped,
                }
                if command.get("full", True):
                    report["received"] = received
                emit(report)
            elif name == "quit":
                return


async def main(arguments: argparse.Namespace) -> None:
    config = NetConfig(
        listen="/ip4/127.0.0.1/tcp/0",
        bootstrap=[addr for addr in arguments.bootstrap.split(",") if addr],
        heartbeat_s=1.0,
    )
    degrees = [int(value) for value in arguments.mesh.split(",")] if arguments.mesh else [6, 4, 12]
    gossip_config = GossipConfig(heartbeat_s=1.0, degree=degrees[0], degree_low=degrees[1],
                                 degree_high=degrees[2])
    net = NetService(config, Identity.generate(), gossip_config=gossip_config)
    worker = Worker(net)
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        emit({"event": "ready", "addr": net.listen_addrs()[0], "pid": os.getpid()})
        await worker.serve()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--profile", default="", help="write a cProfile of the whole run here")
    parser.add_argument("--mesh", default="", help="D,D_lo,D_hi (default 6,4,12)")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    arguments = parser.parse_args()
    if arguments.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            trio.run(main, arguments)
        finally:
            profiler.disable()
            profiler.dump_stats(arguments.profile)
    else:
        trio.run(main, arguments)
