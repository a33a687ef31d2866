#!/usr/bin/env python
"""Flood benchmark (issue 11 row 6): one fresh key floods listings while honest nodes gossip.

    .venv/bin/python scripts/bench_flood.py [--junk 2000 --seconds 20 --honest 20]

Five real py-libp2p hosts in one trio run on 127.0.0.1: four honest nodes in a
full mesh and a flooder connected to node-1 only, whose validators are removed
so it sends whatever it likes. The flooder publishes ``--junk`` valid listings
from one key over ``--seconds``; meanwhile node-4 publishes ``--honest``
listings spread over the same period. Measured on the honest nodes:

- honest delivery fraction: honest listings received by node-1..3 / (3 x honest),
- junk stored: listings from the flooder key that reached the handlers of node-1
  and, summed, of node-2..3,
- node-2's event-loop lag (how late a 50 ms timer fires, p50/p99 in ms), before
  and during the flood: what a CLI/API call to that node waits on. (The CLI
  itself is not run here: this is the same process's loop, not an HTTP round trip.)

Run twice in the same process: ``baseline`` with the per-origin rate limits
switched off (the behaviour before issue 11), then ``limited`` with the shipped
defaults. The last line is one JSON object with both and their ratios.
``--smoke``: 60 junk listings and 3 honest ones over 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import trio

# tests/ is not an installed package: the net helpers are read from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import add_smoke_flag, percentile, print_result, smoke

from node.net.rules.validation import DEFAULT_RATE_LIMITS
from node.net.service import NetService
from protocol.envelope import seal
from protocol.topics import GOSSIP_TOPICS, SKILLS
from tests.support.net import Inbox, make_listing, make_net
from tests.support.wait import wait_until_async


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def measure_lag(samples: list[float], stop: trio.Event) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await trio.sleep(0.05)
        samples.append((time.perf_counter() - start - 0.05) * 1000)


async def scenario(junk: int, seconds: float, honest_count: int, limited: bool) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        nodes: list[NetService] = []
        for _ in range(4):
            node = make_net(bootstrap=[n.listen_addrs()[0] for n in nodes])
            if not limited:
                node.validator.rate_limits = {}
            await nursery.start(node.run)
            nodes.append(node)
        flooder = make_net(bootstrap=[nodes[0].listen_addrs()[0]])
        for topic in GOSSIP_TOPICS:
            flooder.pubsub.remove_topic_validator(topic)
        await nursery.start(flooder.run)
        await wait_until_async(lambda: all(len(n.mesh_peers(SKILLS)) >= 3 for n in nodes[:1])
                               and nodes[0].peer_id in flooder.mesh_peers(SKILLS), 60, "mesh")
        inboxes = [Inbox() for _ in nodes]
        for node, inbox in zip(nodes, inboxes, strict=True):
            inbox.attach(node)

        before: list[float] = []
        stop = trio.Event()
        nursery.start_soon(measure_lag, before, stop)
        await trio.sleep(2.0)
        stop.set()

        during: list[float] = []
        stop = trio.Event()
        nursery.start_soon(measure_lag, during, stop)
        honest = nodes[3]
        sent: list[tuple[bytes, int]] = []

        async def publish_honest() -> None:
            for index in range(honest_count):
                envelope = await honest.publish(SKILLS, make_listing(honest.identity, f"honest-{index}",
                                                                     now_ms()))
                sent.append((envelope.sender, envelope.seq))
                await trio.sleep(seconds / honest_count)

        nursery.start_soon(publish_honest)
        me = flooder.identity
        interval = seconds / junk
        for index in range(junk):
            issued = now_ms()
            data = seal(me, "skill_listing", make_listing(me, f"junk-{index}", issued),
                        flooder.sequence.next(), issued)
            try:
                await flooder.pubsub.publish(SKILLS, data)
            except Exception:
                pass  # cut off by the victim: keep trying, as an attacker would
            await trio.sleep(interval)
        await wait_until_async(lambda: len(sent) == honest_count, 60, "honest publishes done")
        wanted = set(sent)
        try:
            await wait_until_async(lambda: all(wanted <= {(e.sender, e.seq) for e in inbox.listings}
                                               for inbox in inboxes[:3]), 10, "honest delivery")
        except TimeoutError:
            pass  # lost in a full queue: that is what is measured
        stop.set()
        received = sum(len(wanted & {(e.sender, e.seq) for e in inbox.listings}) for inbox in inboxes[:3])
        junk_at = [sum(1 for e in inbox.listings if e.sender == me.public_key) for inbox in inboxes]
        result = {
            "honest_delivery_fraction": round(received / (3 * honest_count), 4),
            "junk_stored_node1": junk_at[0],
            "junk_stored_others": sum(junk_at[1:3]),
            "flooder_banned_by_node1": nodes[0].is_banned(flooder.peer_id),
            "lag_before_p50_ms": round(percentile(before, 50), 2),
            "lag_before_p99_ms": round(percentile(before, 99), 2),
            "lag_during_p50_ms": round(percentile(during, 50), 2),
            "lag_during_p99_ms": round(percentile(during, 99), 2),
            "dropped_in_queues": sum(n.gossip.dropped for n in nodes),
        }
        nursery.cancel_scope.cancel()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junk", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--honest", type=int, default=20)
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), junk=60, seconds=1.5, honest=3)
    baseline = trio.run(scenario, args.junk, args.seconds, args.honest, False)
    print("baseline (no rate limits):", json.dumps(baseline))
    limited = trio.run(scenario, args.junk, args.seconds, args.honest, True)
    print("limited (defaults", json.dumps(DEFAULT_RATE_LIMITS), "):", json.dumps(limited))
    ratio = {
        "junk_stored_node1": round(limited["junk_stored_node1"] / max(1, baseline["junk_stored_node1"]), 4),
        "lag_during_p99": round(limited["lag_during_p99_ms"] / max(0.01, baseline["lag_during_p99_ms"]), 3),
    }
    print_result({"baseline": baseline, "limited": limited, "ratio_limited_to_baseline": ratio,
                  "junk": args.junk, "seconds": args.seconds, "honest": args.honest})


if __name__ == "__main__":
    main()
