#!/usr/bin/env python3
"""A learning Ethernet switch with netem's delay/loss model, for kernels without sch_netem.

``scripts/sim_netem.py`` runs it inside the bridge namespace when ``tc qdisc add …
netem`` is refused ("Specified qdisc kind is unknown": the kernel has no sch_netem).
It reads every frame arriving on the bridge-side ends of the nodes' veth pairs
(AF_PACKET sockets; offloads are turned off on those veths, so frames are whole and
checksummed), drops it with probability ``loss`` and forwards it after
``delay ± jitter`` ms (uniform, independently per frame: netem's default model,
so frames can be reordered exactly as netem reorders them). A frame crosses one
such hop from sender to receiver, as with ``netem`` on each node's own interface.

Usage: _netem_switch.py --delay-ms 40 --jitter-ms 10 --loss 0.01 --seed 1 IFACE...
Stops on SIGTERM/SIGINT and prints one JSON line of counters to stdout.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import selectors
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAX_FRAME = 65_536


def open_port(name: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((name, 0))
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    return sock


def run(names: list[str], delay_s: float, jitter_s: float, loss: float, seed: int) -> dict[str, int]:
    ports = {name: open_port(name) for name in names}
    selector = selectors.DefaultSelector()
    for name, sock in ports.items():
        selector.register(sock, selectors.EVENT_READ, name)
    where: dict[bytes, str] = {}
    queue: list[tuple[float, int, tuple[str, ...], bytes]] = []
    rng = random.Random(seed)
    counters = {"received": 0, "dropped": 0, "sent": 0, "send_errors": 0}
    order = 0
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        now = time.monotonic()
        timeout = max(0.0, queue[0][0] - now) if queue else 0.5
        for key, _ in selector.select(min(timeout, 0.5)):
            sock, port = key.fileobj, key.data
            assert isinstance(sock, socket.socket)
            while True:
                try:
                    frame, address = sock.recvfrom(MAX_FRAME)
                except (BlockingIOError, InterruptedError):
                    break
                if address[2] == PACKET_OUTGOING or len(frame) < 14:
                    continue
                counters["received"] += 1
                where[frame[6:12]] = port
                if rng.random() < loss:
                    counters["dropped"] += 1
                    continue
                destination = where.get(frame[0:6])
                targets = (destination,) if destination and destination != port else tuple(
                    other for other in ports if other != port)
                due = time.monotonic() + max(0.0, delay_s + rng.uniform(-jitter_s, jitter_s))
                order += 1
                heapq.heappush(queue, (due, order, targets, frame))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, targets, frame = heapq.heappop(queue)
            for target in targets:
                try:
                    ports[target].send(frame)
                    counters["sent"] += 1
                except OSError:
                    counters["send_errors"] += 1
    return counters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=40.0)
    parser.add_argument("--jitter-ms", type=float, default=10.0)
    parser.add_argument("--loss", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("ports", nargs="+")
    args = parser.parse_args()
    counters = run(args.ports, args.delay_ms / 1000, args.jitter_ms / 1000, args.loss, args.seed)
    print(json.dumps(counters), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
