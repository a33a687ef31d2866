"""What every benchmark script shares: one percentile, one summary of samples, one last line.

Percentile: linear interpolation between the two closest ranks (Hyndman & Fan
type 7), the definition of ``numpy.percentile``'s default,
``statistics.quantiles(method="inclusive")`` and spreadsheets' PERCENTILE.INC.
For sorted samples x[0..n-1] the p-th percentile sits at position
h = (n - 1) * p / 100 and is x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h]).
Chosen because p50 is then exactly ``statistics.median`` (which several
benchmarks reported beside their percentiles), p0 and p100 are the min and the
max, and it agrees with numpy, so the figures bench_search.py printed with
``np.percentile`` stay identical. Nearest-rank would report only observed
values, but its p50 of an even count is not the median.

Every benchmark ends by printing one JSON object as its last stdout line
(``print_result``), and has a ``--smoke`` flag (``add_smoke_flag``/``smoke``):
seconds, tiny sizes, the same code path; tests/integration/node/test_bench_smoke.py
runs every benchmark that way so none can rot.

Imported as a sibling (``from _bench import ...``): ``python scripts/x.py`` puts
scripts/ on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

SMOKE_HELP = "seconds, tiny sizes, same code path (the test suite runs every benchmark so)"


def percentile(samples: Iterable[float], percent: float) -> float:
    """The ``percent``-th percentile (0..100) of ``samples``, type 7 (see above); nan if empty."""
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be within 0..100, not {percent}")
    ordered = sorted(samples)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * percent / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def quantiles(
    samples: Sequence[float], percents: Sequence[float] = (50, 99), digits: int = 1
) -> dict[str, Any]:
    """``{"samples": n, "p50": ..., "p99": ..., "max": ...}`` rounded to ``digits``; ``{"samples": 0}`` if empty."""
    if not samples:
        return {"samples": 0}
    summary: dict[str, Any] = {"samples": len(samples)}
    for percent in percents:
        summary[f"p{percent:g}"] = round(percentile(samples, percent), digits)
    summary["max"] = round(max(samples), digits)
    return summary


def add_smoke_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def smoke(arguments: argparse.Namespace, **sizes: Any) -> argparse.Namespace:
    """With ``--smoke``, set the tiny ``sizes`` (argument name -> value) over the parsed ones."""
    if arguments.smoke:
        for name, value in sizes.items():
            if not hasattr(arguments, name):
                raise AttributeError(f"no argument {name!r} to shrink")
            setattr(arguments, name, value)
    return arguments


def print_result(result: dict[str, Any]) -> None:
    """The benchmark's last stdout line: one JSON object (what the docs and the smoke test read)."""
    print(json.dumps(result), flush=True)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, all its threads (``/proc/<pid>/stat``).

    Read from outside the process, so benchmarks measure workers written in any language
    the same way (bench_gossip's Python and js-libp2p nodes, sim_scale's validation run).
    """
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14, 15
