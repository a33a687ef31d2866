"""A measured Sybil defence: honest and malicious peers exchanging trust reports, no network.

Every simulated node is a real :class:`TrustService` over an in-memory database
(``node.db.Database``), so the simulation exercises the same ledger, report, matrix,
EigenTrust, level and gate code as a running node; only gossip is replaced by
handing every report to every node.

Scenario (per round):

1. each honest node buys ``purchases_per_round`` skills from sellers its gate
   admits (any other node, chosen at random). An honest seller's skill is
   delivered intact and works (``delivered_ok`` + ``execution_success``,
   except with probability ``honest_failure_rate`` it fails); a malicious
   seller's skill is delivered intact but poisoned (``delivered_ok`` +
   ``execution_failure``);
2. every node publishes a report: honest nodes their real row, malicious
   nodes a row praising every other malicious node equally;
3. every node receives every report, and honest nodes recompute.

The first ``management`` honest nodes are management (pre-trusted) nodes.
The defence holds in a round when, at every honest node, every malicious
peer is below provisional and every other honest peer is at least
provisional.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from node.config import NodeConfig
from node.db import Database
from node.trust.ledger import TrustEvent
from node.trust.levels import TrustLevel
from node.trust.service import TrustService
from protocol.identity import Identity
from protocol.messages import TrustEntry, TrustReport
from protocol.schema import PPM

START_MS = 1_700_000_000_000


@dataclass(frozen=True)
class SybilScenario:
    honest: int = 10
    malicious: int = 5
    management: int = 1
    purchases_per_round: int = 2
    rounds: int = 6
    honest_failure_rate: float = 0.0
    self_pretrust: bool = True
    seed: int = 1


@dataclass
class RoundFigures:
    round: int
    defended: bool
    malicious_levels: dict[str, int]
    honest_levels: dict[str, int]
    malicious_max_reputation: float
    honest_min_reputation: float
    malicious_global_share: float
    poisoned_purchases: int
    refused_purchases: int
    eigentrust_iterations: int


@dataclass
class SimulationResult:
    scenario: SybilScenario
    rounds: list[RoundFigures] = field(default_factory=list)

    @property
    def rounds_needed(self) -> int | None:
        """First round from which the defence held in every later round too."""
        needed: int | None = None
        for figures in self.rounds:
            if not figures.defended:
                needed = None
            elif needed is None:
                needed = figures.round
        return needed

    def summary(self) -> dict[str, Any]:
        last = self.rounds[-1] if self.rounds else None
        return {
            "scenario": asdict(self.scenario),
            "rounds_needed": self.rounds_needed,
            "defended_at_end": bool(last and last.defended),
            "poisoned_purchases_total": sum(r.poisoned_purchases for r in self.rounds),
            "final": asdict(last) if last else None,
        }


def _identity(index: int, seed: int) -> Identity:
    return Identity.from_seed(hashlib.sha256(f"sim-sybil/{seed}/{index}".encode()).digest())


class _Clock:
    def __init__(self) -> None:
        self.now_ms = START_MS

    def __call__(self) -> int:
        return self.now_ms


def simulate(scenario: SybilScenario = SybilScenario()) -> SimulationResult:
    rng = random.Random(scenario.seed)
    clock = _Clock()
    total = scenario.honest + scenario.malicious
    keys = [_identity(i, scenario.seed).public_key for i in range(total)]
    honest = list(range(scenario.honest))
    malicious = list(range(scenario.honest, total))
    management = {keys[i] for i in honest[: scenario.management]}
    config = NodeConfig()
    stores = [Database(Path(":memory:")) for _ in honest]
    services = {
        i: TrustService(
            stores[i],
            config,
            keys[i],
            management,
            lambda: False,
            clock=clock,
            self_pretrust=scenario.self_pretrust,
        )
        for i in honest
    }
    result = SimulationResult(scenario)
    try:
        for round_number in range(1, scenario.rounds + 1):
            clock.now_ms += int(config.trust.report_interval_s * 1000)
            poisoned, refused = _trade(scenario, rng, services, keys, malicious)
            reports = {i: services[i].build_report(clock.now_ms // 1000) for i in honest}
            for m in malicious:
                reports[m] = _praise(keys, m, malicious, clock.now_ms // 1000)
            for receiver in honest:
                for sender, report in reports.items():
                    if sender != receiver:
                        services[receiver].add_report(keys[sender], report, clock.now_ms)
            iterations = max(services[i].recompute().iterations for i in honest)
            result.rounds.append(
                _figures(
                    round_number, services, keys, honest, malicious, poisoned, refused, iterations
                )
            )
    finally:
        for store in stores:
            store.close()
    return result


def _trade(
    scenario: SybilScenario,
    rng: random.Random,
    services: dict[int, TrustService],
    keys: list[bytes],
    malicious: list[int],
) -> tuple[int, int]:
    poisoned = refused = 0
    for buyer, service in services.items():
        for _ in range(scenario.purchases_per_round):
            seller = rng.choice([i for i in range(len(keys)) if i != buyer])
            if not service.gate(keys[seller]).admitted:
                refused += 1
                continue
            service.record(keys[seller], TrustEvent.DELIVERED_OK)
            if seller in malicious:
                poisoned += 1
                service.record(keys[seller], TrustEvent.EXECUTION_FAILURE, "poisoned skill")
            elif rng.random() < scenario.honest_failure_rate:
                service.record(keys[seller], TrustEvent.EXECUTION_FAILURE, "honest failure")
            else:
                service.record(keys[seller], TrustEvent.EXECUTION_SUCCESS)
    return poisoned, refused


def _praise(keys: list[bytes], sender: int, malicious: list[int], epoch: int) -> TrustReport:
    friends = [m for m in malicious if m != sender]
    if not friends:
        return TrustReport(epoch=epoch, row=())
    share = PPM // len(friends)
    return TrustReport(epoch=epoch, row=tuple(TrustEntry(keys[m], share) for m in friends))


def _figures(
    round_number: int,
    services: dict[int, TrustService],
    keys: list[bytes],
    honest: list[int],
    malicious: list[int],
    poisoned: int,
    refused: int,
    iterations: int,
) -> RoundFigures:
    malicious_levels: Counter[str] = Counter()
    honest_levels: Counter[str] = Counter()
    malicious_reputation: list[float] = []
    honest_reputation: list[float] = []
    malicious_share: list[float] = []
    defended = True
    for observer in honest:
        service = services[observer]
        for m in malicious:
            level = service.level(keys[m])
            malicious_levels[level.value] += 1
            malicious_reputation.append(service.reputation(keys[m]))
            defended &= not level.at_least(TrustLevel.PROVISIONAL)
        for h in honest:
            if h == observer:
                continue
            level = service.level(keys[h])
            honest_levels[level.value] += 1
            honest_reputation.append(service.reputation(keys[h]))
            defended &= level.at_least(TrustLevel.PROVISIONAL)
        trust = service.last_result.trust if service.last_result else {}
        malicious_share.append(sum(trust.get(keys[m].hex(), 0.0) for m in malicious))
    return RoundFigures(
        round=round_number,
        defended=defended,
        malicious_levels=dict(sorted(malicious_levels.items())),
        honest_levels=dict(sorted(honest_levels.items())),
        malicious_max_reputation=round(max(malicious_reputation, default=0.0), 4),
        honest_min_reputation=round(min(honest_reputation, default=0.0), 4),
        malicious_global_share=round(max(malicious_share, default=0.0), 6),
        poisoned_purchases=poisoned,
        refused_purchases=refused,
        eigentrust_iterations=iterations,
    )
