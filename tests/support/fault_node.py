"""Run the normal ``crystalmesh`` CLI with one test-only fault injected.

    python -m tests.support.fault_node FAULT -- <crystalmesh args>

Faults (paths a well-behaved seller never takes, so the product cannot reach them):
  crash_before_settle the seller dies (exit 17, like kill -9) after recording the sale
                      ``authorized``, before it asks the chain to settle
  crash_after_settle  the seller dies (exit 17) after settling on chain and recording
                      the sale ``settled``, before the delivery leaves
  tamper_delivery     the seller ships a payload that does not match the listing's hash
  crash_buyer_after_sending
                      the buyer dies (exit 17) once the seller has answered its one-round-trip
                      paid request, before it reads the answer: the seller settled and
                      delivered into the void, the buyer's journal says only ``authorized``
  crash_on_voucher_received
                      the seller dies as a voucher purchase arrives, before it checks or
                      records anything
  crash_after_voucher_recorded
                      the seller dies right after recording the voucher sale, before delivering
  crash_buyer_after_voucher_sent
                      the buyer dies once the seller has answered its voucher purchase (the
                      seller recorded and delivered), before it reads the answer
  crash_before_claim_sent
                      the seller dies after journaling a claim, before sending it
  crash_after_claim_mined
                      the seller dies after its claim (and settle) is mined, before recording it
  crash_after_refund_mined
                      the seller dies after a cooperative refund is mined, before answering

The product package carries no fault hooks: this launcher monkeypatches
``SettlementEngine.accept_payment_async`` (crash_before_settle) or
``Seller._deliver`` (the point where a settled sale turns into a reply) or
``PurchaseTransport.request_envelope`` (the buyer's side of one exchange) and then
hands over to ``node.cli.main``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from node.chain.settlement import SettlementEngine
from node.market.purchase.seller import Seller
from node.net.reqresp import PurchaseTransport
from protocol.envelope import Envelope, open_envelope
from protocol.messages import PaidPurchaseRequest

VOUCHER_FAULTS = ("crash_on_voucher_received", "crash_after_voucher_recorded",
                  "crash_buyer_after_voucher_sent", "crash_before_claim_sent",
                  "crash_after_claim_mined", "crash_after_refund_mined")
FAULTS = ("crash_before_settle", "crash_after_settle", "tamper_delivery",
          "crash_buyer_after_sending", *VOUCHER_FAULTS)
log = logging.getLogger(__name__)


def inject(fault: str) -> None:
    if fault not in FAULTS:
        raise SystemExit(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    if fault in VOUCHER_FAULTS:
        _inject_voucher_fault(fault)
        log.warning("test fault injection active fault=%s", fault)
        return
    if fault == "crash_before_settle":
        async def crash(self: SettlementEngine, *args: Any, **kwargs: Any) -> Any:
            os._exit(17)

        SettlementEngine.accept_payment_async = crash  # type: ignore[method-assign]
        log.warning("test fault injection active fault=%s", fault)
        return
    if fault == "crash_buyer_after_sending":
        exchange = PurchaseTransport.request_envelope

        async def die_on_answer(self: PurchaseTransport, peer: str, data: bytes,
                                timeout_s: float = 30.0) -> Envelope:
            answer = await exchange(self, peer, data, timeout_s)
            if open_envelope(data).kind == PaidPurchaseRequest.KIND:
                os._exit(17)
            return answer

        PurchaseTransport.request_envelope = die_on_answer  # type: ignore[method-assign]
        log.warning("test fault injection active fault=%s", fault)
        return
    original: Callable[..., bytes] = Seller._deliver

    def faulty_deliver(self: Seller, request_id: str, stored: Any, payload: str, tx_hash: str) -> bytes:
        if fault == "crash_after_settle":
            os._exit(17)
        return original(self, request_id, stored, payload + "\n(tampered)", tx_hash)

    Seller._deliver = faulty_deliver  # type: ignore[method-assign]
    log.warning("test fault injection active fault=%s", fault)


def _inject_voucher_fault(fault: str) -> None:
    from node.market.purchase.channels.chain import FacadeChannels
    from node.market.purchase.channels.ledger import ChannelLedger
    from protocol.channel import VoucherPurchaseRequest

    def die(*args: Any, **kwargs: Any) -> Any:
        os._exit(17)

    if fault == "crash_on_voucher_received":
        Seller._sell_voucher = die  # type: ignore[method-assign]
    elif fault == "crash_after_voucher_recorded":
        record = ChannelLedger.record_voucher_sale

        def record_then_die(self: ChannelLedger, *args: Any) -> bool:
            if record(self, *args):
                os._exit(17)
            return False

        ChannelLedger.record_voucher_sale = record_then_die  # type: ignore[method-assign]
    elif fault == "crash_buyer_after_voucher_sent":
        exchange = PurchaseTransport.request_envelope

        async def die_on_answer(self: PurchaseTransport, peer: str, data: bytes,
                                timeout_s: float = 30.0) -> Envelope:
            answer = await exchange(self, peer, data, timeout_s)
            if open_envelope(data).kind == VoucherPurchaseRequest.KIND:
                os._exit(17)
            return answer

        PurchaseTransport.request_envelope = die_on_answer  # type: ignore[method-assign]
    elif fault == "crash_before_claim_sent":
        FacadeChannels.claim = die  # type: ignore[method-assign]
    elif fault in ("crash_after_claim_mined", "crash_after_refund_mined"):
        name = "claim" if fault == "crash_after_claim_mined" else "refund"
        real = getattr(FacadeChannels, name)

        def mined_then_die(self: FacadeChannels, *args: Any) -> Any:
            real(self, *args)
            os._exit(17)

        setattr(FacadeChannels, name, mined_then_die)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit("usage: python -m tests.support.fault_node FAULT -- <crystalmesh args>")
    inject(argv[0])
    from node.cli.main import main as cli_main

    return cli_main(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
