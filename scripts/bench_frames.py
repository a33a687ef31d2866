"""CPU per frame through py-libp2p's TCP + Noise + yamux + stream layers, one frame at a time.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_frames.py --round-trips 3000

Two NetService hosts in this one process (127.0.0.1), one stream between them; host A
writes a 728-byte message (a listing envelope's size), host B echoes it, A reads it back,
and only then the next: every write is one yamux frame in one Noise message, every read
wakes its task for that one frame, the regime of a node carrying gossip at a low rate
(bench_gossip at 35 msg/s), where a frame's fixed cost (trio passes, syscalls, locks,
per-frame logging) is most of the cost. ``cpu_us_per_round_trip`` is this process's
CPU time (user + system, ``time.process_time``) per round trip: two frames written, two
read. Run it with ``PYTHONPATH`` on two checkouts to compare their libp2p_tuning; being
one process it is far less sensitive to the machine's load than bench_gossip (tests/ is read
from this checkout only when PYTHONPATH has none).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import trio
from _bench import add_smoke_flag, print_result, smoke
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr
from multiaddr import Multiaddr

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/, after PYTHONPATH

from tests.support.net import make_net

ECHO = TProtocol("/crystalmesh-bench/echo/1")
MESSAGE = b"x" * 728


async def measure(round_trips: int, warmup: int) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        writer, echoer = make_net(), make_net()
        await nursery.start(writer.run)
        await nursery.start(echoer.run)

        async def echo(stream: Any) -> None:
            while True:
                data = await stream.read(65536)
                if not data:
                    return
                await stream.write(data)

        echoer.host.set_stream_handler(ECHO, echo)
        await writer.host.connect(info_from_p2p_addr(Multiaddr(echoer.listen_addrs()[0])))
        stream = await writer.host.new_stream(ID.from_base58(echoer.peer_id), [ECHO])

        async def round_trip() -> None:
            await stream.write(MESSAGE)
            received = 0
            while received < len(MESSAGE):
                received += len(await stream.read(65536))

        for _ in range(warmup):
            await round_trip()
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        for _ in range(round_trips):
            await round_trip()
        cpu_s, wall_s = time.process_time() - cpu_start, time.perf_counter() - wall_start
        nursery.cancel_scope.cancel()
    return {"round_trips": round_trips, "message_bytes": len(MESSAGE),
            "cpu_us_per_round_trip": round(1e6 * cpu_s / round_trips, 1),
            "wall_us_per_round_trip": round(1e6 * wall_s / round_trips, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), round_trips=50, warmup=10)
    print_result(trio.run(measure, arguments.round_trips, arguments.warmup))


if __name__ == "__main__":
    main()
