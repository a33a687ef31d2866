"""A seller's first buyers ask at once whether it takes vouchers (issue 36, seen in
``scripts/sim_netem.py``: three buyers of one seller were sent to ``exact`` for an hour):
callers arriving while the contract check runs wait for its answer instead of a "no"."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from node.market.purchase.channels.chain import FacadeChannels


class SlowChain:
    """``get_code`` that answers only when released (the contract is there)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def get_code(self, address: str) -> bytes:
        self.calls += 1
        self.entered.set()
        self.release.wait()
        return b"\x60\x80"


def test_callers_during_the_check_get_its_answer_not_a_miss() -> None:
    chain = SlowChain()
    facade = FacadeChannels(SimpleNamespace(signer=chain))  # type: ignore[arg-type]
    answers: dict[str, Any] = {}
    first = threading.Thread(target=lambda: answers.setdefault("first", facade.available()))
    first.start()
    chain.entered.wait()
    second = threading.Thread(target=lambda: answers.setdefault("second", facade.available()))
    second.start()
    second.join(0.5)  # a caller that does not wait answers now, while the check is running
    chain.release.set()
    first.join()
    second.join()
    assert answers == {"first": True, "second": True}
    assert chain.calls == 1
