"""Gossip benchmark: N node processes, one publisher, rate stepped up within one run,
against N stock js-libp2p processes doing the same in the same run.

    .venv/bin/python scripts/bench_gossip.py --nodes 10 --rates 35,75,150 --count 200

Every node is a separate OS process running a NetService
(scripts/_gossip_worker.py) on 127.0.0.1; node i bootstraps from up to 4
random earlier nodes. Node 0 publishes ``--count`` skill listings at each rate
step (10, 20, 35, 50, 75, 100 … up to ``--rate``), signed by a fresh set of
seller keys of at most 30 listings each: every node keeps its shipped
per-origin limit (``net.origin_listings_burst``, 30 at once from one key), so
this is many sellers announcing through one node. Each listing carries its
send time (same machine clock); receivers record receive time in their
handler, i.e. after validation and dispatch. Per step:

- p50 / p99 of the publish → *all*-received latency (max over receivers, per message),
- delivered fraction = receptions / ((N - 1) × count),
- CPU ms per message = CPU of all node processes during the step / count, and
  ``cpu_ms_per_msg_per_node`` = that / N (user + system time of each process, all
  its threads, read by this harness from ``/proc/<pid>/stat`` before and after
  the step, the same way for both sides: it counts what the machine spent, not
  wall time, and holds on a machine shared with other jobs),
- ratios against the first (lowest) step of the same run.

**The js-libp2p side** (``scripts/_gossip_worker.mjs``, unless ``--no-js`` or
node / tools/node_modules are missing): N stock js-libp2p 2.x nodes (TCP,
Noise, yamux, @chainsafe/libp2p-gossipsub) started with the same dial graph
(node i dials the same up-to-4 earlier indices), the same gossipsub parameters
(D / D_lo / D_hi, 1 s heartbeat, gossip window and history, flood publishing,
/meshsub/1.1.0, StrictSign, sha256 message ids, no behaviour or IP
colocation score penalties: crystalmesh weighs neither), messages of
``--bytes`` (728, a listing envelope's size) at the same rates and counts, and
js-libp2p's connection monitor off (it closes a connection whose 10 s ping
times out, which on a loaded machine cut the js topology apart; py-libp2p has
none). The js messages carry no envelope: their figure is what a stock node
spends to carry a message, ours adds our validator (CBOR + Ed25519). Both sides run
all the time; at each rate the two steps run back to back (which side goes
first alternates), so they share the machine's load. Before anything is
measured both sides carry ``--warmup`` messages (a running js node is past its
JIT). Per rate the JSON gains ``js_cpu_ms_per_msg_per_node`` and
``ratio_to_js`` (ours / js's, < 1 is cheaper), and the summary
``js_max_rate_no_loss``. A run uses 2N + 1 processes (N Python workers, N node
processes, this harness); with ``--no-js`` N + 1. A side that lost messages at
a step takes no higher step; the other goes on.

Before the first step every node idles for ``--idle`` seconds and
``idle_cpu_ms_per_s_per_node`` is what a node spends with no listings at all
(heartbeats, discovery, the harness): the fixed cost inside every step's figure.
``cpu_ms_per_msg_per_node_less_idle`` takes that rate times the step's duration
out: the marginal cost of a message, the figure to compare at low rates (at
5 listings/s the idle cost alone is several ms per message).

The last line is one JSON object: ``max_rate_no_loss``, the p50 / p99 /
delivered / ``cpu_ms_per_msg_per_node`` of that rate, ``by_rate`` (the same
figures for every step) and the steps. ``--profile DIR`` writes one cProfile
file per worker (``DIR/node-<i>.pstats``; cProfile slows the workers, so
figures of a profiled run are not figures of record).
``--smoke``: 3 nodes, one step of 40 listings (two seller keys) at 40/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _bench import add_smoke_flag, percentile, print_result, process_cpu_s, smoke

WORKER = Path(__file__).with_name("_gossip_worker.py")
JS_WORKER = Path(__file__).with_name("_gossip_worker.mjs")
NODE_MODULES = Path(__file__).resolve().parents[1] / "tools" / "node_modules"
DEFAULT_STEPS = (10, 20, 35, 50, 75, 100, 150, 200)


class Node:
    def __init__(self, index: int, command: list[str]) -> None:
        self.index = index
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.addr = ""
        self.pid = self.process.pid

    def cpu_s(self) -> float:
        return process_cpu_s(self.pid)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def expect(self, event: str, timeout_s: float = 60.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"node {self.index}: no {event!r} within {timeout_s} s")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if not ready:
                continue
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"node {self.index} exited (code {self.process.poll()})")
            message = json.loads(line)
            if message.get("event") == event:
                return message

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
            self.process.wait(timeout=5)
        except Exception:
            self.process.kill()
            self.process.wait()


def py_command(index: int, bootstrap: list[str], profile_dir: str, mesh: str) -> list[str]:
    profile = ["--profile", str(Path(profile_dir) / f"node-{index}.pstats")] if profile_dir else []
    degrees = ["--mesh", mesh] if mesh else []
    return [sys.executable, str(WORKER), "--bootstrap", ",".join(bootstrap), *profile, *degrees]


def js_command(message_bytes: int, mesh: str) -> Any:
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "@chainsafe" / "libp2p-gossipsub").is_dir():
        return None

    def command(index: int, bootstrap: list[str], profile_dir: str, _mesh: str) -> list[str]:
        return [node, str(JS_WORKER), str(NODE_MODULES), "--bootstrap", ",".join(bootstrap),
                "--mesh", mesh or "6,4,12", "--bytes", str(message_bytes)]

    return command


def start_nodes(count: int, seed: int, command: Any, profile_dir: str = "",
                mesh: str = "") -> list[Node]:
    """``count`` nodes; node i dials up to 4 earlier ones, the same indices for a given seed."""
    rng = random.Random(seed)
    nodes: list[Node] = []
    for index in range(count):
        earlier = rng.sample(nodes, min(4, len(nodes)))
        node = Node(index, command(index, [peer.addr for peer in earlier], profile_dir, mesh))
        nodes.append(node)
        node.addr = node.expect("ready")["addr"]
    return nodes


def wait_for_mesh(nodes: list[Node], timeout_s: float = 60.0, degree_low: int = 4) -> None:
    want = min(len(nodes) - 1, degree_low)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sizes = []
        for node in nodes:
            node.send({"cmd": "status"})
            sizes.append(node.expect("status")["mesh"])
        if min(sizes) >= want:
            return
        time.sleep(0.2)
    raise TimeoutError(f"mesh did not form: sizes {sizes}")


def collect(nodes: list[Node], phase: int, full: bool = True) -> list[dict[str, Any]]:
    """Every node's report, with ``cpu_s`` read from /proc once it is in; ``full=False``
    counts receptions without listing them."""
    for node in nodes:
        node.send({"cmd": "report", "phase": phase, "full": full})
    reports = [node.expect("report") for node in nodes]
    for node, report in zip(nodes, reports, strict=True):
        report["cpu_s"] = node.cpu_s()
    return reports


def idle_cpu_ms_per_s(nodes: list[Node], seconds: float) -> float:
    """CPU all nodes spend per second with no messages, per node."""
    before = sum(report["cpu_s"] for report in collect(nodes, -1, full=False))
    started = time.monotonic()
    time.sleep(seconds)
    after = sum(report["cpu_s"] for report in collect(nodes, -1, full=False))
    return (after - before) * 1000 / (time.monotonic() - started) / len(nodes)


def run_step(
    nodes: list[Node], phase: int, rate: float, count: int, drain_s: float, idle_ms_per_s: float
) -> dict[str, Any]:
    started = time.monotonic()
    before = collect(nodes, phase, full=False)
    cpu_before = sum(report["cpu_s"] for report in before)
    publisher = nodes[0]
    publisher.send({"cmd": "publish", "phase": phase, "rate": rate, "count": count})
    published = publisher.expect("published", timeout_s=count / rate * 5 + 30)
    expected = (len(nodes) - 1) * count
    deadline = time.monotonic() + drain_s
    while True:
        reports = collect(nodes, phase, full=False)
        received = sum(report["count"] for report in reports[1:])
        if received >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    cpu_s = sum(report["cpu_s"] for report in reports) - cpu_before
    step_s = time.monotonic() - started
    reports = collect(nodes, phase)
    per_message: dict[int, list[int]] = {}
    for report in reports[1:]:
        for index, latency_us in report["received"]:
            per_message.setdefault(index, []).append(latency_us)
    complete = [
        max(latencies) / 1000
        for latencies in per_message.values()
        if len(latencies) == len(nodes) - 1
    ]
    each = [latency / 1000 for latencies in per_message.values() for latency in latencies]
    return {
        "rate": rate,
        "achieved_rate": round(published["achieved_rate"], 1),
        "count": count,
        "delivered_fraction": round(received / expected, 4) if expected else 1.0,
        "p50_ms": round(percentile(complete, 50), 2),
        "p99_ms": round(percentile(complete, 99), 2),
        "p50_each_ms": round(percentile(each, 50), 2),
        "sellers": published["sellers"],
        "cpu_ms_per_msg": round(cpu_s * 1000 / count, 2),
        "cpu_ms_per_msg_per_node": round(cpu_s * 1000 / count / len(nodes), 3),
        "cpu_ms_per_msg_per_node_less_idle": round(
            (cpu_s * 1000 / len(nodes) - idle_ms_per_s * step_s) / count, 3),
        "step_s": round(step_s, 2),
        "cpu_util": round(cpu_s / max(count / rate, 1e-9), 2),
        "inbox_dropped": sum(report["dropped"] for report in reports),
    }


def print_table(results: list[dict[str, Any]]) -> None:
    baseline = results[0]
    header = (
        f"{'side':>4} {'rate':>6} {'achieved':>8} {'deliv':>7} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cpu ms/msg':>10} {'/node':>6} {'cores':>6} {'p50 x':>6} {'p99 x':>6} {'cpu x':>6}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row.get('side', 'py'):>4} "
            f"{row['rate']:>6} {row['achieved_rate']:>8} {row['delivered_fraction']:>7.3f} "
            f"{row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['cpu_ms_per_msg']:>10.2f} "
            f"{row['cpu_ms_per_msg_per_node']:>6.2f} {row['cpu_util']:>6.2f} "
            f"{row['p50_ms'] / baseline['p50_ms']:>6.2f} {row['p99_ms'] / baseline['p99_ms']:>6.2f} "
            f"{row['cpu_ms_per_msg'] / baseline['cpu_ms_per_msg']:>6.2f}"
        )


def warm_up(nodes: list[Node], count: int, rate: float, drain_s: float) -> None:
    """``count`` messages at ``rate`` through ``nodes``, not measured (phase -2)."""
    if count <= 0:
        return
    nodes[0].send({"cmd": "publish", "phase": -2, "rate": rate, "count": count})
    nodes[0].expect("published", timeout_s=count / rate * 5 + 30)
    expected = (len(nodes) - 1) * count
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline:
        if sum(report["count"] for report in collect(nodes, -2, full=False)[1:]) >= expected:
            return
        time.sleep(0.1)


def by_rate(results: list[dict[str, Any]], js_results: list[dict[str, Any]]) -> dict[str, Any]:
    js = {row["rate"]: row for row in js_results}
    table: dict[str, Any] = {}
    for row in results:
        entry = {
            key: row[key]
            for key in ("achieved_rate", "delivered_fraction", "p50_ms", "p99_ms",
                        "cpu_ms_per_msg_per_node", "cpu_ms_per_msg_per_node_less_idle")
        }
        other = js.get(row["rate"])
        if other is not None:
            entry["js_cpu_ms_per_msg_per_node"] = other["cpu_ms_per_msg_per_node"]
            entry["js_cpu_ms_per_msg_per_node_less_idle"] = other["cpu_ms_per_msg_per_node_less_idle"]
            entry["js_achieved_rate"] = other["achieved_rate"]
            entry["js_delivered_fraction"] = other["delivered_fraction"]
            entry["js_p50_ms"] = other["p50_ms"]
            entry["js_p99_ms"] = other["p99_ms"]
            entry["ratio_to_js"] = round(
                row["cpu_ms_per_msg_per_node"] / max(other["cpu_ms_per_msg_per_node"], 1e-9), 3)
        table[f"{row['rate']:g}"] = entry
    return table


def max_rate_no_loss(results: list[dict[str, Any]]) -> float:
    loss_free = [row["rate"] for row in results if row["delivered_fraction"] >= 1.0]
    return max(loss_free) if loss_free else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--rate", type=float, default=100, help="highest rate step (msg/s)")
    parser.add_argument("--rates", default="", help="explicit comma-separated rate steps")
    parser.add_argument("--count", type=int, default=200, help="listings per rate step")
    parser.add_argument("--drain", type=float, default=5.0, help="seconds to wait for stragglers")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--stop-after-loss", type=int, default=1, help="steps with loss before a side stops"
    )
    parser.add_argument("--idle", type=float, default=5.0,
                        help="seconds of no traffic measured before the first step")
    parser.add_argument("--profile", default="", help="directory for one cProfile file per node")
    parser.add_argument("--mesh", default="", help="D,D_lo,D_hi for every node (default 6,4,12)")
    parser.add_argument("--no-js", action="store_true", help="no js-libp2p side")
    parser.add_argument("--bytes", type=int, default=728, help="js message size (a listing's)")
    parser.add_argument("--warmup", type=int, default=600,
                        help="messages each side carries, unmeasured, before anything is measured")
    parser.add_argument("--warmup-rate", type=float, default=100.0)
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), nodes=3, rates="40", count=40, drain=5.0, idle=1.0,
                      warmup=40, warmup_rate=40.0)

    if arguments.rates:
        steps = [float(rate) for rate in arguments.rates.split(",")]
    else:
        steps = [float(rate) for rate in DEFAULT_STEPS if rate < arguments.rate] + [arguments.rate]

    started = time.monotonic()
    if arguments.profile:
        Path(arguments.profile).mkdir(parents=True, exist_ok=True)
    js = None if arguments.no_js else js_command(arguments.bytes, arguments.mesh)
    if js is None and not arguments.no_js:
        print("no js-libp2p side: node or tools/node_modules missing (scripts/setup)", flush=True)
    degree_low = int(arguments.mesh.split(",")[1]) if arguments.mesh else 4
    sides: dict[str, list[Node]] = {}
    try:
        sides["py"] = start_nodes(arguments.nodes, arguments.seed, py_command, arguments.profile,
                                  arguments.mesh)
        if js is not None:
            sides["js"] = start_nodes(arguments.nodes, arguments.seed, js)
        for nodes in sides.values():
            wait_for_mesh(nodes, degree_low=degree_low)
        processes = sum(len(nodes) for nodes in sides.values()) + 1
        print(
            f"{arguments.nodes} nodes a side ({', '.join(sides)}) up and meshed in "
            f"{time.monotonic() - started:.1f} s; {processes} processes; "
            f"{arguments.count} messages per step",
            flush=True,
        )
        for nodes in sides.values():
            warm_up(nodes, arguments.warmup, arguments.warmup_rate, arguments.drain)
        idle = {name: idle_cpu_ms_per_s(nodes, arguments.idle) for name, nodes in sides.items()}
        print("idle: " + ", ".join(f"{name} {value:.1f}" for name, value in idle.items())
              + " ms CPU per second per node", flush=True)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        lossy = dict.fromkeys(sides, 0)
        for phase, rate in enumerate(steps):
            order = list(sides) if phase % 2 == 0 else list(reversed(sides))
            for name in order:
                if lossy[name] >= arguments.stop_after_loss:
                    continue
                row = run_step(sides[name], phase, rate, arguments.count, arguments.drain,
                               idle[name])
                row["side"] = name
                results[name].append(row)
                print(json.dumps(row), flush=True)
                if row["delivered_fraction"] < 1.0:
                    lossy[name] += 1
            if all(lossy[name] >= arguments.stop_after_loss for name in sides):
                break
    finally:
        for nodes in sides.values():
            for node in nodes:
                node.close()

    ours, theirs = results["py"], results.get("js", [])
    print_table(ours + theirs)
    loss_free = [row for row in ours if row["delivered_fraction"] >= 1.0]
    best = max(loss_free, key=lambda row: row["rate"]) if loss_free else ours[0]
    summary = {
        "nodes": arguments.nodes,
        "processes": processes,
        "count_per_step": arguments.count,
        "max_rate_no_loss": max_rate_no_loss(ours),
        "js_max_rate_no_loss": max_rate_no_loss(theirs) if theirs else None,
        "p50_ms": best["p50_ms"],
        "p99_ms": best["p99_ms"],
        "delivered_fraction": best["delivered_fraction"],
        "cpu_ms_per_msg": best["cpu_ms_per_msg"],
        "cpu_ms_per_msg_per_node": best["cpu_ms_per_msg_per_node"],
        "idle_cpu_ms_per_s_per_node": round(idle["py"], 2),
        "js_idle_cpu_ms_per_s_per_node": round(idle["js"], 2) if "js" in idle else None,
        "by_rate": by_rate(ours, theirs),
        "baseline_rate": ours[0]["rate"],
        "baseline_p50_ms": ours[0]["p50_ms"],
        "baseline_p99_ms": ours[0]["p99_ms"],
        "median_p50_ms": percentile([row["p50_ms"] for row in ours], 50),
        "load_average": os.getloadavg(),
        "steps": ours + theirs,
        "wall_s": round(time.monotonic() - started, 1),
    }
    print_result(summary)


if __name__ == "__main__":
    main()
