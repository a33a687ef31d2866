#!/usr/bin/env python3
"""End-to-end purchase latency and throughput on a real devnet.

Starts anvil (automine) + a management node + 3 edge nodes, has node-1
publish skills, then node-2 and node-3 buy them through the local API (the
same path as `crystalmesh skill buy`): quote → EIP-3009 authorization →
on-chain settlement → signed delivery → hash + transfer check → ingest →
receipt. Reports p50/p99 latency of sequential purchases, purchases/s with
concurrent buyers, and the ratio to a baseline API round trip (GET
/v1/status) measured in the same run.

Issue 36: the same buyer then buys as many listings again with vouchers (x402
batch-settlement): one channel-opening purchase (its deposit submitted by the seller,
reported apart), then voucher purchases (no chain transaction each). The sequential
exact purchases above are forced to ``exact`` (``"exact": true``), so both schemes run
in one devnet, one after the other: ``exact_p50_ms``, ``voucher_p50_ms`` and their ratio
(target: voucher p50 ≤ 1/5 of exact).

    .venv/bin/python scripts/bench_purchase.py --count 40 --concurrency 4

node-1 publishes one listing per purchase (80 by default) from its one key,
more than the 30 every node accepts at once from one origin key; the devnet's
nodes therefore run with ``net.origin_listings_burst`` raised to that count
(``CRYSTALMESH_NET_ORIGIN_LISTINGS_BURST``, reported as
``origin_listings_burst``). The limit only gates listing intake, which is set-up
here, outside every timed region; the purchase path is the product's as shipped.

Last line: one JSON object with p50_ms, p99_ms, purchases_per_s, ...
``--smoke``: 3 sequential and 4 concurrent purchases by 2 buyers, hashing embedder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _bench import add_smoke_flag, percentile, print_result, smoke

# Generous caps: the benchmark buys far more than an agent would in a day.
os.environ.setdefault("CRYSTALMESH_MARKET_MAX_PER_DAY_MICRO_USDC", str(10**12))
os.environ["CRYSTALMESH_MARKET_VOUCHERS"] = "true"  # exact is asked for per purchase below

from node.api.client import ApiClient, running_node
from node.config import load_config
from node.devnet import manager
from node.net.rules.validation import DEFAULT_RATE_LIMITS
from protocol.topics import SKILLS


def client(state: manager.DevnetState, name: str) -> ApiClient:
    found = running_node(load_config(Path(state.node(name).data_dir)), timeout_s=120)
    assert found is not None
    return found


def publish_skills(seller: ApiClient, count: int) -> list[str]:
    listing_ids = []
    for index in range(count):
        crystal = seller.post("/v1/crystals", {
            "text": f"Benchmark skill {index}: restart the worker pool, drain queue {index}, verify",
            "type": "skill", "scope": "public", "category": "bench", "tags": ["bench"],
        })
        for _ in range(3):
            seller.post(f"/v1/skills/{crystal['id']}/executions", {"success": True, "reward": 0.9})
        listing_ids.append(seller.post(f"/v1/skills/{crystal['id']}/publish")["listing_id"])
    return listing_ids


def wait_known(buyer: ApiClient, listing_ids: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    wanted = set(listing_ids)
    while time.monotonic() < deadline:
        known = {item["listing_id"] for item in buyer.get("/v1/listings")["listings"]}
        if wanted <= known:
            return
        time.sleep(0.2)
    raise SystemExit("listings did not reach the buyers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=40, help="sequential purchases")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent buyers (threads)")
    parser.add_argument("--concurrent-count", type=int, default=40, help="purchases in the concurrent phase")
    parser.add_argument("--embedder", default="minilm")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), count=3, concurrent_count=4, concurrency=2, embedder="hashing")
    total = 2 * args.count + 1 + args.concurrent_count
    burst = max(total, DEFAULT_RATE_LIMITS[SKILLS][1])
    os.environ["CRYSTALMESH_NET_ORIGIN_LISTINGS_BURST"] = str(burst)

    with tempfile.TemporaryDirectory(prefix="cm-bench-purchase-") as tmp:
        print("starting devnet (anvil + management + 3 nodes)...", file=sys.stderr)
        state = manager.up(3, Path(tmp) / "devnet", embedder=args.embedder, timeout_s=180)
        try:
            seller, buyer_b, buyer_c = (client(state, name) for name in ("node-1", "node-2", "node-3"))
            listing_ids = publish_skills(seller, total)
            wait_known(buyer_b, listing_ids)
            wait_known(buyer_c, listing_ids)

            baseline = []
            for _ in range(50):
                start = time.perf_counter()
                buyer_b.get("/v1/status")
                baseline.append((time.perf_counter() - start) * 1000)

            sequential = []
            for listing_id in listing_ids[: args.count]:
                start = time.perf_counter()
                paid = buyer_b.post("/v1/purchases", {"listing_id": listing_id, "exact": True})
                sequential.append((time.perf_counter() - start) * 1000)
                assert paid["scheme"] == "exact", paid

            voucher_ids = listing_ids[args.count: 2 * args.count + 1]
            start = time.perf_counter()
            opened = buyer_b.post("/v1/purchases", {"listing_id": voucher_ids[0]})
            opening_ms = (time.perf_counter() - start) * 1000
            assert opened["scheme"] == "batch-settlement" and opened["deposit_micro_usdc"], opened
            vouchers = []
            for listing_id in voucher_ids[1:]:
                start = time.perf_counter()
                paid = buyer_b.post("/v1/purchases", {"listing_id": listing_id})
                vouchers.append((time.perf_counter() - start) * 1000)
                assert paid["scheme"] == "batch-settlement" and not paid["deposit_micro_usdc"], paid
            start = time.perf_counter()
            claimed = seller.post("/v1/market/claim")
            claim_ms = (time.perf_counter() - start) * 1000

            remaining = listing_ids[2 * args.count + 1:]
            lock = threading.Lock()
            errors: list[str] = []

            def worker(index: int) -> None:
                api = client(state, "node-2" if index % 2 == 0 else "node-3")
                while True:
                    with lock:
                        if not remaining:
                            return
                        listing_id = remaining.pop()
                    try:
                        api.post("/v1/purchases", {"listing_id": listing_id})
                    except Exception as error:  # reported, not hidden
                        errors.append(str(error))

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.concurrency)]
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            concurrent_done = args.concurrent_count - len(errors)
        finally:
            manager.down(Path(tmp) / "devnet")

    p50, p99 = percentile(sequential, 50), percentile(sequential, 99)
    base_p50 = percentile(baseline, 50)
    voucher_p50 = percentile(vouchers, 50)
    result = {
        "exact_p50_ms": round(p50, 1),
        "voucher_p50_ms": round(voucher_p50, 1),
        "voucher_p99_ms": round(percentile(vouchers, 99), 1),
        "ratio_voucher_to_exact_p50": round(voucher_p50 / p50, 3),
        "voucher_target_ratio": 0.2,
        "meets_voucher_target": voucher_p50 <= p50 / 5,
        "purchases_voucher": len(vouchers),
        "channel_opening_ms": round(opening_ms, 1),
        "claim_ms": round(claim_ms, 1),
        "claimed_micro_usdc": claimed["claimed_micro_usdc"],
        "purchases_sequential": len(sequential),
        "p50_ms": round(p50, 1),
        "p99_ms": round(p99, 1),
        "mean_ms": round(statistics.mean(sequential), 1),
        "sequential_purchases_per_s": round(1000 / statistics.mean(sequential), 2),
        "concurrency": args.concurrency,
        "purchases_concurrent": concurrent_done,
        "errors": len(errors),
        "purchases_per_s": round(concurrent_done / elapsed, 2),
        "baseline_api_p50_ms": round(base_p50, 2),
        "ratio_p50_to_api_baseline": round(p50 / base_p50, 1),
        "target_p50_ms": 300,
        "origin_listings_burst": burst,
        "meets_target": p50 <= 300,
    }
    print(f"sequential exact purchases: {len(sequential)}  p50 {p50:.1f} ms  p99 {p99:.1f} ms")
    print(f"voucher purchases: {len(vouchers)}  p50 {voucher_p50:.1f} ms "
          f"({result['ratio_voucher_to_exact_p50']}x exact); channel opening {opening_ms:.1f} ms; "
          f"one claim of {claimed['claimed_micro_usdc']} micro-USDC {claim_ms:.1f} ms")
    print(f"concurrent ({args.concurrency} buyers): {concurrent_done} in {elapsed:.2f} s "
          f"= {result['purchases_per_s']} purchases/s, errors {len(errors)}")
    print(f"baseline API round trip p50 {base_p50:.2f} ms; purchase/baseline = "
          f"{result['ratio_p50_to_api_baseline']}x")
    if errors:
        print("first error:", errors[0])
    print_result(result)


if __name__ == "__main__":
    main()
