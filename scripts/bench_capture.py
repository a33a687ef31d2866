#!/usr/bin/env python3
"""Hook latency: ``crystalmesh hook claude-code`` as Claude Code runs it, timed from process start to exit.

SessionStart (prints MEMORY.md + pending notes as additionalContext) and SessionEnd
(queues the transcript and starts the worker) on a data dir with a hand-written
MEMORY.md and a few scratch notes, without a node and with ``crystalmesh run``
beside it; each hook a fresh ``python -m node.cli.main`` process fed the hook JSON on
stdin. Each SessionEnd starts the capture worker; the next hook is timed once that
worker is done (hooks come a turn apart; the worker's own cost is the ingest's, measured
by the transcript benchmark). Target (issue 34): p50 ≤
300 ms for both, node or not. The last line is one JSON object. ``--smoke``: 3 runs
each, no node.

    python scripts/bench_capture.py [--runs 40] [--no-node-only]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _bench import add_smoke_flag, print_result, quantiles, smoke

from node.capture import CaptureQueue
from node.memory import file_lock

REPO = Path(__file__).resolve().parents[1]
SESSION = "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d"


def crystalmesh(data_dir: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), *args],
                          input=stdin, capture_output=True, env=env, timeout=300, check=False)


def write_transcript(path: Path, turns: int) -> None:
    """A short Claude Code session (the envelope of each line as Claude Code writes it)."""
    lines = []
    for index in range(turns):
        role = "user" if index % 2 == 0 else "assistant"
        content: Any = f"question {index} about the deploy" if role == "user" else [
            {"type": "text", "text": f"answer {index}: the deploy script needs the staging key"}]
        lines.append(json.dumps({"parentUuid": None, "isSidechain": False, "type": role, "sessionId": SESSION,
                                 "uuid": f"00000000-0000-4000-8000-{index:012d}", "cwd": "/home/dev/project",
                                 "timestamp": f"2026-11-02T09:{index % 60:02d}:00.000Z",
                                 "message": {"role": role, "content": content}}))
    path.write_text("\n".join(lines) + "\n")


def hook_latencies_ms(data_dir: Path, event: str, transcript: Path, runs: int,
                      env: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    """Wall time and CPU time (user + system) of ``runs`` hook processes for ``event`` (each must
    exit 0). CPU time is what the hook costs whatever else the machine runs; wall time is what the
    host waits, which on a loaded machine is mostly waiting for a core."""
    stdin = json.dumps({"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/dev/project",
                        "hook_event_name": event}).encode()
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = crystalmesh(data_dir, "hook", "claude-code", stdin=stdin, env=env)
        wall.append((time.perf_counter() - started) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"hook {event} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        worker_done(data_dir)
    return wall, cpu


def worker_done(data_dir: Path, timeout_s: float = 120) -> None:
    """Wait (untimed) for the worker a hook started: hooks come a turn apart, not back to back, so
    each is timed without the previous one's worker on the CPU."""
    queue = CaptureQueue(data_dir)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not queue.pending():
            with file_lock(queue.drain_lock_path, blocking=False) as free:
                if free:
                    return
        time.sleep(0.05)
    raise SystemExit("the capture worker did not finish within 120 s")


def start_node(data_dir: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    node = subprocess.Popen([sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "run"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if crystalmesh(data_dir, "status", "--json", env=env).returncode == 0:
            return node
        time.sleep(0.5)
    node.terminate()
    raise SystemExit("the node did not start within 120 s")


def measure(data_dir: Path, transcript: Path, runs: int, env: dict[str, str]) -> dict[str, Any]:
    result = {}
    for name, event in (("session_start", "SessionStart"), ("session_end", "SessionEnd")):
        wall, cpu = hook_latencies_ms(data_dir, event, transcript, runs, env)
        result[name] = quantiles(wall) | {"cpu_p50": quantiles(cpu)["p50"]}
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="hook processes per event and setting")
    parser.add_argument("--no-node-only", action="store_true", help="skip the runs beside a node")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(argv), runs=3, no_node_only=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("CRYSTALMESH_")}
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        env |= {"PYTHONPATH": str(REPO), "CRYSTALMESH_HOME": str(root / "home")}
        data_dir = root / "node"
        if crystalmesh(data_dir, "init", "--embedder", "hashing", env=env).returncode != 0:
            raise SystemExit("crystalmesh init failed")
        state = data_dir / "memory" / "default"
        state.mkdir(parents=True)
        (state / "MEMORY.md").write_text("# Notes\n\n" + "".join(f"- fact {i} about the build\n" for i in range(150)))
        for index in range(3):
            crystalmesh(data_dir, "memory", "note", f"pending note {index}: the user prefers small commits",
                        env=env)
        transcript = root / f"{SESSION}.jsonl"
        write_transcript(transcript, 40)
        python_wall: list[float] = []  # what any Python process costs here, for scale
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            python_wall.append((time.perf_counter() - started) * 1000)
        result: dict[str, Any] = {"runs": args.runs, "target_p50_ms": 300,
                                  "bare_python_p50_ms": quantiles(python_wall)["p50"],
                                  "no_node": measure(data_dir, transcript, args.runs, env)}
        if not args.no_node_only:
            node = start_node(data_dir, env)
            try:
                result["node_running"] = measure(data_dir, transcript, args.runs, env)
            finally:
                node.terminate()
                node.wait(timeout=60)
    print_result(result)


if __name__ == "__main__":
    main()
