#!/usr/bin/env python3
"""Settlement benchmark: gas per purchase and settlements/s, single vs batched, and
gas per purchase paid by channel vouchers (x402 batch-settlement).

Starts its own anvil (chain id 84532), places USDC and a BatchSettler, funds
``--buyers`` wallets, pre-signs every authorization *outside* the timed region
(EIP-712 + coincurve; the signing rate is reported separately), then times the
settlement engine end to end: ledger writes (SQLite WAL, synchronous=FULL),
transaction signing, broadcast, receipt, Transfer-event check.

    .venv/bin/python scripts/bench_settlement.py [--single 200] [--per-batch-size 1000]

Vouchers, on the same anvil: ``--channels`` buyers each deposit into a channel to the
seller (the deposit is relayed through the x402 SDK's facilitator), then make
``--voucher-purchases`` purchases each (one cumulative voucher signed and verified per
purchase, no transaction); one ``claimWithSignature`` claims every channel's latest voucher
and one ``settle`` pays the seller. ``gas_per_purchase_voucher`` = (claim + settle gas) /
purchases in that claim (100 purchases across 10 channels by default);
``gas_per_purchase_voucher_100_per_channel`` is the same with 100 purchases per channel (the
reading under which x402's own snapshot, 192,043 + 31,204 gas, gives ~220). A channel's
deposit is paid once per channel, reported apart (``gas_deposit``).

The last line is one JSON object (gas_single, gas_batched_50, settles_per_s_single,
settles_per_s_batched, gas_per_purchase_voucher, ...). ``--smoke``: 5 single, 20 batched in
batches of 10, 20 buyers, 3 channels.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _bench import add_smoke_flag, print_result, smoke
from eth_account import Account

from node.chain.authorization import Authorization, sign_authorization
from node.chain.channels import (
    Channels,
    SignedVoucher,
    channel_config,
    channel_requirements,
    new_salt,
    sign_channel_voucher,
    sign_deposit,
    voucher_signature_valid,
)
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
    parser.add_argument("--channels", type=int, default=10, help="channels claimed in one voucher claim")
    parser.add_argument("--voucher-purchases", type=int, default=100,
                        help="voucher purchases per claim, spread evenly over the channels")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), single=5, per_batch_size=20, batch_sizes="10", buyers=20,
                 channels=3, voucher_purchases=30)
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
        vouchers = run_vouchers(chain.rpc_url, devnet.token_address, devnet.chain_id, seller,
                                channels=args.channels, purchases=args.voucher_purchases)

    print(f"{'mode':<12} {'settlements':>11} {'gas/purchase':>13} {'settles/s':>10}")
    for mode, row in results.items():
        print(f"{mode:<12} {int(row['count']):>11} {row['gas']:>13.0f} {row['per_s']:>10.0f}")
    single = results["single"]
    print(f"signing (pre-signed, untimed above): {signs_per_s:.0f} authorizations/s")
    for size in batch_sizes:
        row = results[f"batched_{size}"]
        print(f"batched_{size}/single: gas x{row['gas'] / single['gas']:.2f}, "
              f"throughput x{row['per_s'] / single['per_s']:.1f}")
    print(f"vouchers: {args.voucher_purchases} purchases across {args.channels} channels per claim: "
          f"{vouchers['gas_per_purchase']:.0f} gas/purchase (claim {vouchers['gas_claim']}, "
          f"settle {vouchers['gas_settle']}); 100 per channel: {vouchers['gas_per_purchase_100']:.0f}; "
          f"deposit {vouchers['gas_deposit']} once per channel; "
          f"{vouchers['verifies_per_s']:.0f} voucher verifications/s")
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
        "gas_per_purchase_voucher": round(vouchers["gas_per_purchase"]),
        "gas_per_purchase_voucher_100_per_channel": round(vouchers["gas_per_purchase_100"]),
        "voucher_channels_per_claim": args.channels,
        "voucher_purchases_per_claim": args.voucher_purchases,
        "gas_voucher_claim": vouchers["gas_claim"],
        "gas_voucher_settle": vouchers["gas_settle"],
        "gas_deposit": vouchers["gas_deposit"],
        "voucher_verifies_per_s": round(vouchers["verifies_per_s"], 1),
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


def run_vouchers(rpc_url: str, token_address: str, chain_id: int, seller: object, *,
                 channels: int, purchases: int) -> dict[str, float]:
    """Deposit into ``channels`` channels, pay ``purchases`` vouchers across them, claim
    them all in one transaction and settle; then the same with 100 purchases per channel."""
    from eth_account.signers.local import LocalAccount

    assert isinstance(seller, LocalAccount)
    client = ChainClient.connect(rpc_url, token_address, expected_chain_id=chain_id)
    seller_channels = Channels(client, seller)
    requirements = channel_requirements(chain_id=chain_id, token_address=token_address, pay_to=seller.address,
                                        price_micro=PRICE_MICRO, receiver_authorizer=seller.address)
    per_channel = max(1, purchases // channels)
    deposit = (per_channel + 100 + 1) * PRICE_MICRO * 2
    payers = [Account.create() for _ in range(channels)]
    fund(rpc_url, [payer.address for payer in payers], usdc_micro=deposit, eth_wei=0)
    configs = []
    deposit_gas = []
    for payer in payers:
        config = channel_config(payer=payer.address, receiver=seller.address, receiver_authorizer=seller.address,
                                token_address=token_address, salt=new_salt())
        opened = seller_channels.deposit(sign_deposit(payer, requirements, config, deposit, PRICE_MICRO),
                                         requirements)
        deposit_gas.append(int(client.wait_receipt(opened.transaction)["gasUsed"]))
        configs.append(config)

    def pay(rounds: int, already: int) -> tuple[list[SignedVoucher], float]:
        """Each purchase: the payer signs the next cumulative voucher, the seller verifies it."""
        latest: list[SignedVoucher] = []
        verify_s = 0.0
        for payer, config in zip(payers, configs, strict=True):
            voucher = None
            for purchase in range(1, rounds + 1):
                voucher = sign_channel_voucher(payer, config, chain_id, (already + purchase) * PRICE_MICRO)
                started = time.perf_counter()
                if not voucher_signature_valid(voucher, chain_id):
                    raise SystemExit("a voucher failed verification")
                verify_s += time.perf_counter() - started
            assert voucher is not None
            latest.append(voucher)
        return latest, rounds * len(payers) / verify_s

    def claim_and_settle(latest: list[SignedVoucher]) -> tuple[int, int]:
        claim_gas = int(client.wait_receipt(seller_channels.claim(latest))["gasUsed"])
        settle_tx, _amount = seller_channels.settle()
        return claim_gas, int(client.wait_receipt(settle_tx)["gasUsed"])

    # The first claim and settle write fresh slots (the channel's first totalClaimed, the
    # receiver's first totals): a steady-state seller claims channels it has claimed before.
    warm, _rate = pay(1, 1)
    claim_and_settle(warm)
    latest, verifies_per_s = pay(per_channel, 2)
    claim_gas, settle_gas = claim_and_settle(latest)
    latest_100, _rate = pay(100, 2 + per_channel)
    claim_gas_100, settle_gas_100 = claim_and_settle(latest_100)
    return {
        "gas_per_purchase": (claim_gas + settle_gas) / (per_channel * channels),
        "gas_per_purchase_100": (claim_gas_100 + settle_gas_100) / (100 * channels),
        "gas_claim": claim_gas, "gas_settle": settle_gas,
        "gas_deposit": round(sum(deposit_gas) / len(deposit_gas)),
        "verifies_per_s": verifies_per_s,
    }


if __name__ == "__main__":
    main()
