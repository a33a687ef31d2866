#!/usr/bin/env python3
"""Settlement benchmark: gas per purchase and settlements/s, single vs batched.

Starts its own anvil (chain id 84532), places USDC and a BatchSettler, funds
``--buyers`` wallets, pre-signs every authorization *outside* the timed region
(EIP-712 + coincurve; the signing rate is reported separately), then times the
settlement engine end to end: ledger writes (SQLite WAL, synchronous=FULL),
transaction signing, broadcast, receipt, Transfer-event check.

    .venv/bin/python scripts/bench_settlement.py [--single 200] [--per-batch-size 1000]

The last line is one JSON object (gas_single, gas_batched_50, settles_per_s_single,
settles_per_s_batched, ...). ``--smoke``: 5 single, 20 batched in batches of 10, 20 buyers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _bench import add_smoke_flag, print_result, smoke
from eth_account import Account

from node.chain.authorization import Authorization, sign_authorization
from node.chain.client import ChainClient
from node.chain.ledger import SettlementLedger
from node.chain.localchain import LocalChain, deploy_devnet, fund
from node.chain.settlement import SettlementEngine

PRICE_MICRO = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=200, help="settlements in the single run")
    parser.add_argument("--per-batch-size", type=int, default=1000,
                        help="settlements per batched run (one run per batch size)")
    parser.add_argument("--batch-sizes", default="10,50,100")
    parser.add_argument("--buyers", type=int, default=200,
                        help="distinct payers; items in one batch come from distinct payers")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), single=5, per_batch_size=20, batch_sizes="10", buyers=20)
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]

    with LocalChain() as chain, tempfile.TemporaryDirectory() as tmp:
        devnet = deploy_devnet(chain.rpc_url)
        seller = Account.create()
        buyers = [Account.create() for _ in range(args.buyers)]
        total = args.single + args.per_batch_size * len(batch_sizes) + 1
        per_buyer = (total // args.buyers + 2) * PRICE_MICRO
        fund(chain.rpc_url, [b.address for b in buyers], usdc_micro=per_buyer, eth_wei=0)
        fund(chain.rpc_url, [seller.address], usdc_micro=0, eth_wei=10**21)

        started = time.perf_counter()
        signed = [
            sign_authorization(buyers[i % len(buyers)], chain_id=devnet.chain_id,
                               token_address=devnet.token_address, to=seller.address,
                               value_micro=PRICE_MICRO)
            for i in range(total)
        ]
        signs_per_s = total / (time.perf_counter() - started)

        def engine(batch_size: int, name: str) -> SettlementEngine:
            client = ChainClient.connect(chain.rpc_url, devnet.token_address, devnet.settler_address,
                                         expected_chain_id=devnet.chain_id)
            return SettlementEngine(client, SettlementLedger(Path(tmp) / f"{name}.db"), seller,
                                    batch_max_size=batch_size)

        # The payee's first credit writes a fresh balance slot (+17k gas): do it untimed.
        warm = engine(1, "warm").settle(signed.pop())
        assert warm.settled, warm

        results: dict[str, dict[str, float]] = {}
        single_engine = engine(1, "single")
        results["single"] = run(single_engine, signed[: args.single], one_by_one=True)
        offset = args.single
        for size in batch_sizes:
            items = signed[offset : offset + args.per_batch_size]
            offset += args.per_batch_size
            results[f"batched_{size}"] = run(engine(size, f"batch{size}"), items, one_by_one=False)

    print(f"{'mode':<12} {'settlements':>11} {'gas/purchase':>13} {'settles/s':>10}")
    for mode, row in results.items():
        print(f"{mode:<12} {int(row['count']):>11} {row['gas']:>13.0f} {row['per_s']:>10.0f}")
    single = results["single"]
    print(f"signing (pre-signed, untimed above): {signs_per_s:.0f} authorizations/s")
    for size in batch_sizes:
        row = results[f"batched_{size}"]
        print(f"batched_{size}/single: gas x{row['gas'] / single['gas']:.2f}, "
              f"throughput x{row['per_s'] / single['per_s']:.1f}")
    best = max(batch_sizes, key=lambda size: results[f"batched_{size}"]["per_s"])
    summary = {
        "gas_single": round(single["gas"]),
        "settles_per_s_single": round(single["per_s"], 1),
        **{f"gas_batched_{size}": round(results[f"batched_{size}"]["gas"]) for size in batch_sizes},
        **{f"settles_per_s_batched_{size}": round(results[f"batched_{size}"]["per_s"], 1)
           for size in batch_sizes},
        "settles_per_s_batched": round(results[f"batched_{best}"]["per_s"], 1),
        "best_batch_size": best,
        "signs_per_s": round(signs_per_s, 1),
        "presigned": True,
    }
    print_result(summary)


def run(engine: SettlementEngine, items: list[Authorization], *, one_by_one: bool) -> dict[str, float]:
    started = time.perf_counter()
    rows = [engine.settle(item) for item in items] if one_by_one else engine.settle_many(items)
    elapsed = time.perf_counter() - started
    if not all(row.settled for row in rows):
        raise SystemExit(f"unsettled rows: {[row for row in rows if not row.settled][:3]}")
    w3 = engine.client.w3
    gas = sum(int(w3.eth.get_transaction_receipt(tx)["gasUsed"]) for tx in {row.tx_hash for row in rows})
    return {"count": len(rows), "gas": gas / len(rows), "per_s": len(rows) / elapsed}


if __name__ == "__main__":
    main()
