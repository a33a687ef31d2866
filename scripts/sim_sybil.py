#!/usr/bin/env python
"""Sybil simulation: honest and malicious peers trading and exchanging trust reports.

Pure (no network): every honest node is a real ``TrustService`` over an
in-memory store; see :mod:`node.trust.simulation` for the scenario. Prints one
line per round, then a summary over ``--seeds`` seeds; the last line is one
JSON object.

    .venv/bin/python scripts/sim_sybil.py [--honest 10] [--malicious 5] [--rounds 6] [--seeds 10]

``--smoke``: one seed.
"""

from __future__ import annotations

import argparse

from _bench import add_smoke_flag, print_result, smoke

from node.trust.simulation import SybilScenario, simulate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--honest", type=int, default=10)
    parser.add_argument("--malicious", type=int, default=5)
    parser.add_argument("--management", type=int, default=1)
    parser.add_argument(
        "--purchases", type=int, default=2, help="purchases per honest node per round"
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--honest-failure-rate", type=float, default=0.0)
    parser.add_argument("--no-self-pretrust", action="store_true")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), seeds=1)

    results = []
    for seed in range(args.seed, args.seed + args.seeds):
        scenario = SybilScenario(
            honest=args.honest,
            malicious=args.malicious,
            management=args.management,
            purchases_per_round=args.purchases,
            rounds=args.rounds,
            honest_failure_rate=args.honest_failure_rate,
            self_pretrust=not args.no_self_pretrust,
            seed=seed,
        )
        result = simulate(scenario)
        for figures in result.rounds:
            print(
                f"seed={seed} round={figures.round} defended={figures.defended} "
                f"malicious={figures.malicious_levels} honest={figures.honest_levels} "
                f"poisoned={figures.poisoned_purchases} refused={figures.refused_purchases} "
                f"malicious_max_rep={figures.malicious_max_reputation} "
                f"honest_min_rep={figures.honest_min_reputation}"
            )
        results.append(result)
    needed = [result.rounds_needed for result in results]
    summary = {
        "honest": args.honest,
        "malicious": args.malicious,
        "management": args.management,
        "purchases_per_round": args.purchases,
        "rounds": args.rounds,
        "honest_failure_rate": args.honest_failure_rate,
        "self_pretrust": not args.no_self_pretrust,
        "seeds": args.seeds,
        "rounds_needed": needed,
        "defended_seeds": sum(1 for value in needed if value is not None),
        "max_rounds_needed": max((value for value in needed if value is not None), default=None),
        "poisoned_purchases": [
            sum(figures.poisoned_purchases for figures in result.rounds) for result in results
        ],
        "honest_false_untrusted_final": [
            result.rounds[-1].honest_levels.get("untrusted", 0) for result in results
        ],
    }
    print_result(summary)
    return 0 if summary["defended_seeds"] == args.seeds else 1


if __name__ == "__main__":
    raise SystemExit(main())
