"""Issue 6 end to end: a sybil collective on a devnet of 12 processes.

10 edge nodes + management + anvil. node-8..node-10 (30 %) collude: they buy
each other's skills and report success (so their trust reports praise each
other) and sell poisoned skills: hash-correct, but they fail when executed.
Honest nodes buy round-robin, "execute" what they bought and record the
outcome. EigenTrust over the gossiped reports must push every malicious node
below provisional on every honest node and stop poisoned ingestion; a
management weather alert must then stop ingestion from all but trusted peers,
and honest sellers with two good trades at a buyer are trusted there and still
get through. Figures go to test-artifacts/sybil.json (docs/benchmarks.md).
Every wait is a condition; API reads are retried (a node under load may reset
a connection).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from node.api.client import ApiError
from tests.support.devnet import REPO, Devnet
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EDGE = 10
MALICIOUS = [f"node-{i}" for i in (8, 9, 10)]
HONEST = [f"node-{i}" for i in range(1, 8)]
REPORT_INTERVAL_S = 1.0
MAX_ROUNDS = 8
ROUND_WAIT_S = 30.0  # how long a round's trust reports may take to arrive before the next round
BELOW_PROVISIONAL = {"untrusted", "banned"}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CRYSTALMESH_TRUST_REPORT_INTERVAL_S", str(REPORT_INTERVAL_S))
        net = Devnet(tmp_path_factory.mktemp("sybil") / "devnet", EDGE)
        with net:
            yield net


def _publish(devnet: Devnet, name: str, text: str) -> str:
    api = devnet.api(name)
    crystal = api.post("/v1/crystals", {"text": text, "type": "skill", "scope": "public",
                                        "category": "ops", "tags": ["ops"]})
    for _ in range(3):
        api.post(f"/v1/skills/{crystal['id']}/executions", {"success": True, "reward": 0.9})
    return str(api.post(f"/v1/skills/{crystal['id']}/publish")["listing_id"])


def _buy(devnet: Devnet, buyer: str, listing_id: str) -> dict[str, Any] | str:
    # Repeat purchases of one listing are the point of the rounds: say so (again).
    # A purchase interrupted by load (timeout, unreachable) is simply run again, as a
    # user would: it resumes the same authorization and never pays twice.
    for _attempt in range(3):
        try:
            return devnet.api(buyer).post("/v1/purchases",  # type: ignore[no-any-return]
                                          {"listing_id": listing_id, "again": True})
        except ApiError as error:
            outcome = f"{error.code}: {error}"
            if error.code not in ("timeout", "seller_unreachable", "seller_busy",
                                  "seller_exchange_failed", "purchase_failed", ""):
                return outcome
    return outcome


def _get(devnet: Devnet, name: str, path: str) -> Any:
    """A read from a node's API, retried: under load a node may reset the connection."""
    return wait_until(lambda: devnet.api(name).get(path), 60, f"GET {path} on {name}")


def _levels(devnet: Devnet, name: str, keys: dict[str, str]) -> dict[str, str]:
    rows = {row["peer_key"]: row["level"] for row in _get(devnet, name, "/v1/trust")["peers"]}
    return {seller: rows.get(key, "provisional") for seller, key in keys.items()}


def test_sybil_collective_is_shut_out(devnet: Devnet) -> None:
    assert devnet.state is not None
    keys = {entry.name: entry.public_key for entry in devnet.state.nodes}
    listings = {
        name: _publish(devnet, name, f"{'POISONED ' if name in MALICIOUS else ''}runbook from "
                                     f"{name}: restart the failing service and verify health checks")
        for name in HONEST + MALICIOUS
    }
    wait_until(lambda: all(set(listings.values()) <= {item["listing_id"] for item in
                                                      devnet.api(n).get("/v1/listings")["listings"]}
                           for n in HONEST + MALICIOUS), 120, "every listing everywhere")
    # Purchases dial the seller directly: wait until the devnet's full mesh of
    # connections is up (nodes report ready after their first peer, not all of them).
    everyone = len(devnet.state.nodes)
    wait_until(lambda: all(_get(devnet, n, "/v1/status")["connected_peers"] >= everyone - 1
                           for n in HONEST + MALICIOUS), 120, "every node connected to every node")

    poisoned: dict[str, int] = dict.fromkeys(HONEST, 0)
    good_trades: dict[tuple[str, str], int] = {}
    per_round: list[dict[str, Any]] = []
    honest_failures: list[tuple[int, str, str, str]] = []
    shut_out_round: int | None = None
    for round_number in range(1, MAX_ROUNDS + 1):
        # The collective praises itself: real purchases among colluders, reported good.
        for buyer in MALICIOUS:
            for seller in MALICIOUS:
                if seller != buyer:
                    bought = _buy(devnet, buyer, listings[seller])
                    if isinstance(bought, dict) and bought["crystal_id"] is not None:
                        devnet.api(buyer).post(f"/v1/skills/{bought['crystal_id']}/executions",
                                               {"success": True, "reward": 1.0})
        ingested_this_round = 0
        refused = 0
        for index, buyer in enumerate(HONEST):
            honest_sellers = [h for h in HONEST if h != buyer]
            # Two purchases per honest node per round, one of them from the collective.
            # The honest seller changes every second round, so each buyer has two good
            # trades with its round-2/3 seller: enough to trust it (docs/trust.md).
            honest_seller = honest_sellers[(index + round_number // 2) % len(honest_sellers)]
            for seller in (honest_seller,
                           MALICIOUS[(index + round_number) % len(MALICIOUS)]):
                bought = _buy(devnet, buyer, listings[seller])
                if isinstance(bought, dict) and not bought["ingested"]:
                    # Paid and delivered, but trust moved between the quote and the delivery:
                    # the gate kept it out of memory (issue 12: the buyer still has it).
                    bought = f"gate (after payment): {bought['not_ingested_because']}"
                if isinstance(bought, str):
                    refused += 1
                    if seller not in MALICIOUS:
                        honest_failures.append((round_number, buyer, seller, bought))
                    continue
                bad = seller in MALICIOUS
                poisoned[buyer] += int(bad)
                if not bad:
                    good_trades[buyer, seller] = good_trades.get((buyer, seller), 0) + 1
                ingested_this_round += int(bad)
                devnet.api(buyer).post(f"/v1/skills/{bought['crystal_id']}/executions",
                                       {"success": not bad, "reward": 0.0 if bad else 0.9})

        def collective_below() -> bool:
            return all(level in BELOW_PROVISIONAL for buyer in HONEST
                       for level in _levels(devnet, buyer, {m: keys[m] for m in MALICIOUS}).values())

        # A condition, not a pause: give this round's reports time to arrive; if the
        # collective is not shut out by then, the next round adds evidence.
        try:
            all_below = bool(wait_until(collective_below, ROUND_WAIT_S, "collective below provisional"))
        except TimeoutError:
            all_below = False
        per_round.append({"round": round_number, "poisoned_ingested": ingested_this_round,
                          "refused": refused, "all_malicious_below_provisional": all_below})
        if all_below and shut_out_round is None:
            shut_out_round = round_number
        if shut_out_round is not None and round_number >= max(shut_out_round + 1, 3):
            break

    assert shut_out_round is not None, f"collective never shut out: {per_round}"
    after = [r for r in per_round if r["round"] > shut_out_round]
    assert after and all(r["poisoned_ingested"] == 0 for r in after), per_round

    # Weather during the attack: only trusted/verified peers' skills get in.
    honest_levels = {buyer: _levels(devnet, buyer, {h: keys[h] for h in HONEST if h != buyer})
                     for buyer in HONEST}
    devnet.api("management").post("/v1/weather/broadcast",
                                   {"level": 0.9, "duration_s": 300, "reason": "sybil wave"})
    wait_until(lambda: all(devnet.api(n).get("/v1/weather")["halt_untrusted_ingestion"]
                           for n in HONEST), 60, "halt on every honest node")
    # A clean record of two good trades is trusted (docs/trust.md): those sellers must get
    # through. Other honest sellers are placed by their relative score, which moves with
    # every report round, so they may go either way, but only through the gate.
    record = {pair for pair, count in good_trades.items() if count >= 2}
    assert {buyer for buyer, _ in record} == set(HONEST), (good_trades, honest_failures)
    gated = 0
    admitted_trusted = 0
    admitted_by_score = 0
    for buyer, row in honest_levels.items():
        for seller, level in row.items():
            result = _buy(devnet, buyer, listings[seller])
            if (buyer, seller) in record:
                assert level in ("trusted", "verified"), (buyer, seller, level)
                assert isinstance(result, dict), (buyer, seller, result)
                admitted_trusted += 1
            elif isinstance(result, dict):
                admitted_by_score += 1
            else:
                assert result.startswith("gate") and ("weather_halt" in result
                                                      or "untrusted" in result), (buyer, seller, result)
                gated += 1
    for buyer in HONEST:
        for seller in MALICIOUS:
            result = _buy(devnet, buyer, listings[seller])
            assert isinstance(result, str) and "gate" in result

    figures = {
        "processes": len(devnet.state.nodes) + 1,
        "honest": len(HONEST),
        "malicious": len(MALICIOUS),
        "rounds_until_all_malicious_below_provisional": shut_out_round,
        "poisoned_ingested_per_honest_node": poisoned,
        "poisoned_before_trust_formed": sum(r["poisoned_ingested"] for r in per_round
                                            if r["round"] <= shut_out_round),
        "poisoned_after_trust_formed": sum(r["poisoned_ingested"] for r in after),
        "per_round": per_round,
        "honest_pairs_with_two_good_trades": len(record),
        "honest_purchases_admitted_by_score_under_weather": admitted_by_score,
        "purchases_gated_by_weather": gated,
        "trusted_purchases_admitted_under_weather": admitted_trusted,
    }
    out = REPO / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "sybil.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures))
    assert admitted_trusted == len(record) > 0, figures
