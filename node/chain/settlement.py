"""The settlement engine: turns accepted authorizations into confirmed USDC transfers.

Seller side of a purchase::

    settlement = await engine.accept_payment_async(authorization, pay_to=me, price_micro=p)
    if settlement.settled: deliver(...)

``accept_payment`` checks the authorization off-chain (signature, payee, amount,
window) and on-chain (nonce unused, balance), records it in the ledger (so it can be
accepted once only), then settles it: alone (``transferWithAuthorization``) or, when
the trio batcher :meth:`SettlementEngine.run` is running, together with others
through the BatchSettler contract (up to ``batch_max_size`` items or
``batch_max_delay_ms``). A settlement counts as confirmed only when the receipt
succeeded *and* carries the token's Transfer(from, to, value) for it.

Blocking work (web3, sqlite3) runs in worker threads; the sync methods are the real
implementation and are what benchmarks call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from eth_account.signers.local import LocalAccount
from web3.exceptions import TimeExhausted
from web3.types import TxReceipt

from node.chain.authorization import DEFAULT_MIN_VALIDITY_S, Authorization, check_authorization
from node.chain.client import (
    GAS_BATCH_BASE,
    GAS_BATCH_PER_ITEM,
    GAS_SINGLE,
    TOPIC_AUTHORIZATION_CANCELED,
    ChainClient,
    encode_settle,
    encode_transfer_with_authorization,
)
from node.chain.errors import ChainError, ChainUnavailable, PaymentRejected
from node.chain.ledger import (
    CONFIRMED,
    FAILED,
    PENDING,
    SUBMITTED,
    Key,
    Settlement,
    SettlementLedger,
)
from node.chain.receipts import (
    batch_outcomes,
    lasting_refusal,
    receipt_used,
    revert_reason_code,
    still_in_mempool,
)
from node.config import ChainConfig

log = logging.getLogger(__name__)

SETTLEMENTS_DB = "settlements.db"

@dataclass
class _Job:
    authorization: Authorization
    done: trio.Event = field(default_factory=trio.Event)
    result: Settlement | None = None
    error: BaseException | None = None


class SettlementEngine:
    """Settles EIP-3009 authorizations for one payee wallet (the ``sender`` pays gas)."""

    def __init__(
        self,
        client: ChainClient,
        ledger: SettlementLedger,
        sender: LocalAccount,
        *,
        batch_max_size: int = ChainConfig.batch_max_size,
        batch_max_delay_ms: int = ChainConfig.batch_max_delay_ms,
        confirm_timeout_s: float = 120.0,
        min_validity_s: int = DEFAULT_MIN_VALIDITY_S,
    ) -> None:
        self.client = client
        self.ledger = ledger
        self.sender = sender
        self.batch_max_size = max(1, batch_max_size)
        self.batch_max_delay_ms = batch_max_delay_ms
        self.confirm_timeout_s = confirm_timeout_s
        self.min_validity_s = min_validity_s
        self._send_lock = threading.Lock()
        self._queue: trio.MemorySendChannel[_Job] | None = None

    @classmethod
    def open(
        cls,
        *,
        rpc_url: str,
        chain_id: int,
        token_address: str,
        settler_address: str,
        sender: LocalAccount,
        data_dir: Path,
        batch_max_size: int = ChainConfig.batch_max_size,
        batch_max_delay_ms: int = ChainConfig.batch_max_delay_ms,
        client: ChainClient | None = None,
    ) -> SettlementEngine:
        """Engine for a node: ledger at ``<data_dir>/settlements.db``.

        Does not touch the network (a node must start while its chain is down).
        ``client``: an already-connected chain to use instead of ``rpc_url``.
        """
        if client is None:
            client = ChainClient.connect(
                rpc_url, token_address, settler_address or None, expected_chain_id=chain_id
            )
        return cls(
            client,
            SettlementLedger(Path(data_dir) / SETTLEMENTS_DB),
            sender,
            batch_max_size=batch_max_size,
            batch_max_delay_ms=batch_max_delay_ms,
        )

    @property
    def pay_to(self) -> str:
        return self.sender.address

    # --- checks -----------------------------------------------------------------------
    def verify(self, authorization: Authorization, *, pay_to: str, price_micro: int,
               now_s: int | None = None) -> None:
        """Raise :class:`PaymentRejected` unless ``authorization`` is acceptable payment
        of exactly ``price_micro`` to ``pay_to``; :class:`ChainUnavailable` if the chain
        cannot be asked. Changes nothing."""
        check_authorization(
            authorization,
            chain_id=self.client.chain_id,
            token_address=self.client.token_address,
            pay_to=pay_to,
            price_micro=price_micro,
            now_s=now_s,
            min_validity_s=self.min_validity_s,
        )
        if self.ledger.get(authorization.key) is not None:
            raise PaymentRejected("replayed", "already presented to this node")
        if self.client.authorization_state(authorization.from_address, authorization.nonce):
            raise PaymentRejected("replayed", "nonce already used or canceled on chain")
        balance = self.client.usdc_balance(authorization.from_address)
        if balance < authorization.value_micro:
            raise PaymentRejected(
                "insufficient_balance", f"{balance} < {authorization.value_micro} micro-USDC"
            )

    def _verify_and_claim(self, authorization: Authorization, pay_to: str, price_micro: int) -> None:
        self.verify(authorization, pay_to=pay_to, price_micro=price_micro)
        if not self.ledger.claim([authorization])[0]:
            raise PaymentRejected("replayed", "already presented to this node")

    # --- sync API ---------------------------------------------------------------------
    def accept_payment(self, authorization: Authorization, *, pay_to: str | None = None,
                       price_micro: int) -> Settlement:
        """Verify, record (once only) and settle alone. Returns the ledger row."""
        self._verify_and_claim(authorization, pay_to or self.pay_to, price_micro)
        return self._settle_claimed([authorization])[0]

    def settle(self, authorization: Authorization) -> Settlement:
        """Settle an authorization the caller has checked; idempotent by (from, nonce)."""
        return self.settle_many([authorization])[0]

    def settle_many(self, authorizations: Sequence[Authorization]) -> list[Settlement]:
        """Settle checked authorizations, ``batch_max_size`` per transaction; idempotent:
        one already in the ledger is not submitted again, its row is returned."""
        created = self.ledger.claim(authorizations)
        fresh = [item for item, new in zip(authorizations, created, strict=True) if new]
        for start in range(0, len(fresh), self.batch_max_size):
            self._settle_claimed(fresh[start : start + self.batch_max_size])
        return self._rows([item.key for item in authorizations])

    def reconcile(self) -> list[Settlement]:
        """Finish what a crash or an outage left open: for each pending/submitted row ask
        the chain (authorizationState, the recorded transaction's receipt, the token's
        AuthorizationUsed log) and mark it confirmed or failed, or submit it again.
        Returns the rows it looked at, in their new state."""
        rows = self.ledger.open_settlements()
        retry: list[Authorization] = []
        for row in rows:
            authorization = row.authorization
            if self.client.authorization_state(authorization.from_address, authorization.nonce):
                self._resolve_used(row)
            elif row.state == SUBMITTED and row.tx_hash and still_in_mempool(self.client, row.tx_hash):
                continue
            elif authorization.valid_before_s <= int(time.time()):
                self.ledger.mark_failed(authorization.key, "expired")
            else:
                retry.append(authorization)
        for start in range(0, len(retry), self.batch_max_size):
            self._settle_claimed(retry[start : start + self.batch_max_size])
        return self._rows([row.key for row in rows])

    # --- trio API ---------------------------------------------------------------------
    async def accept_payment_async(self, authorization: Authorization, *, pay_to: str | None = None,
                                   price_micro: int) -> Settlement:
        """As :meth:`accept_payment`; batched with others when :meth:`run` is running."""
        await trio.to_thread.run_sync(
            self._verify_and_claim, authorization, pay_to or self.pay_to, price_micro
        )
        if self._queue is None:
            rows = await trio.to_thread.run_sync(self._settle_claimed, [authorization])
            return rows[0]
        job = _Job(authorization)
        await self._queue.send(job)
        await job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    async def settle_async(self, authorization: Authorization) -> Settlement:
        return await trio.to_thread.run_sync(self.settle, authorization)

    async def reconcile_async(self) -> list[Settlement]:
        return await trio.to_thread.run_sync(self.reconcile)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The batcher: run it in the node's nursery (``await nursery.start(engine.run)``)."""
        send, receive = trio.open_memory_channel[_Job](math.inf)
        self._queue = send
        task_status.started()
        try:
            async with receive:
                while True:
                    batch = [await receive.receive()]
                    with trio.move_on_after(self.batch_max_delay_ms / 1000):
                        while len(batch) < self.batch_max_size:
                            batch.append(await receive.receive())
                    await self._settle_jobs(batch)
        finally:
            self._queue = None

    async def _settle_jobs(self, batch: list[_Job]) -> None:
        try:
            rows = await trio.to_thread.run_sync(
                self._settle_claimed, [job.authorization for job in batch]
            )
        except Exception as exc:
            for job in batch:
                job.error = exc
                job.done.set()
            return
        for job, row in zip(batch, rows, strict=True):
            job.result = row
            job.done.set()

    # --- submission -------------------------------------------------------------------
    def _rows(self, keys: Sequence[Key]) -> list[Settlement]:
        rows = self.ledger.get_many(keys)
        missing = [key for key, row in zip(keys, rows, strict=True) if row is None]
        if missing:
            raise ChainError(f"settlement rows vanished: {missing}")
        return [row for row in rows if row is not None]

    def _settle_claimed(self, authorizations: Sequence[Authorization]) -> list[Settlement]:
        """Submit rows this caller owns (claimed or being retried) in one transaction.

        Order: sign → record the tx hash (submitted) → broadcast → wait → confirm, so a
        crash at any point leaves a row that :meth:`reconcile` can resolve from the chain.
        """
        keys = [item.key for item in authorizations]
        batched = len(authorizations) > 1 and self.client.settler_address is not None
        if len(authorizations) > 1 and not batched:
            return [row for item in authorizations for row in self._settle_claimed([item])]
        if batched:
            assert self.client.settler_address is not None
            to = self.client.settler_address
            data = encode_settle(self.client.token_address, authorizations)
            gas = GAS_BATCH_BASE + GAS_BATCH_PER_ITEM * len(authorizations)
        else:
            to = self.client.token_address
            data = encode_transfer_with_authorization(authorizations[0])
            gas = GAS_SINGLE
        with self._send_lock:
            tx_hash, raw = self.client.sign_transaction(self.sender, to, data, gas)
            self.ledger.mark_submitted(keys, tx_hash)
            try:
                self.client.broadcast(raw, self.sender.address)
            except ChainUnavailable:
                raise  # it may have reached the node: the row stays submitted for reconcile
            except Exception as exc:
                self.ledger.mark_pending(keys, f"rejected by node: {exc}")
                raise ChainError(f"settlement transaction rejected by the node: {exc}") from exc
        try:
            receipt = self.client.wait_receipt(tx_hash, self.confirm_timeout_s)
        except TimeExhausted:
            log.warning("settlement tx=%s not mined after %ss; reconcile later", tx_hash,
                        self.confirm_timeout_s)
            return self._rows(keys)
        self._apply_receipt(authorizations, tx_hash, receipt, batched=batched)
        return self._rows(keys)

    def _apply_receipt(self, authorizations: Sequence[Authorization], tx_hash: str,
                       receipt: TxReceipt, *, batched: bool) -> None:
        keys = [item.key for item in authorizations]
        if receipt["status"] != 1:
            # Nothing in it happened. Items someone else settled meanwhile are resolved;
            # the rest stay pending for reconcile() to submit again.
            self.ledger.mark_pending(keys, "transaction reverted")
            for item in authorizations:
                if self.client.authorization_state(item.from_address, item.nonce):
                    row = self.ledger.get(item.key)
                    if row is not None:
                        self._resolve_used(row)
                    continue
                reason = lasting_refusal(self.client, self.sender, item)
                if reason is not None:
                    self.ledger.mark_failed(item.key, reason)
            return
        transfers = Counter(self.client.transfer_events(receipt))
        # Settled items are those without an ItemFailed event; each must also show its Transfer.
        outcomes = batch_outcomes(receipt, self.client.settler_address) if batched else {}
        confirmed: list[Key] = []
        unsettled: list[tuple[Authorization, str]] = []
        for index, item in enumerate(authorizations):
            failure = outcomes.get(index)
            expected = (item.from_address, item.to, item.value_micro)
            if failure is None and transfers[expected] > 0:
                transfers[expected] -= 1
                confirmed.append(item.key)
            else:
                unsettled.append((item, failure or "no matching Transfer event"))
        self.ledger.mark_confirmed_many(confirmed, tx_hash, int(receipt["blockNumber"]))
        for item, reason in unsettled:
            self._resolve_after_failure(item, reason)

    def _resolve_after_failure(self, authorization: Authorization, reason: str) -> None:
        """Our transaction did not settle it: perhaps someone else did (the nonce is then
        used and the money went to the signed payee anyway), else it failed."""
        row = self.ledger.get(authorization.key)
        if row is None:
            return
        if self.client.authorization_state(authorization.from_address, authorization.nonce):
            self._resolve_used(row)
        else:
            self.ledger.mark_failed(authorization.key, reason)

    def _resolve_used(self, row: Settlement) -> None:
        """The nonce is used on chain: find the transaction that used it and check it moved
        the money to the payee (confirmed) or was a cancellation (failed)."""
        authorization = row.authorization
        candidates: list[tuple[str, bool]] = []
        if row.tx_hash:
            candidates.append((row.tx_hash, False))
        try:
            for event in self.client.authorization_events(authorization.from_address,
                                                          authorization.nonce):
                canceled = bytes(event["topics"][0]) == bytes(TOPIC_AUTHORIZATION_CANCELED)
                candidates.append((event["transactionHash"].to_0x_hex(), canceled))
        except ChainUnavailable:
            raise
        except Exception as exc:  # a provider refusing a wide log query
            log.warning("cannot search AuthorizationUsed logs: %s", exc)
        expected = (authorization.from_address, authorization.to, authorization.value_micro)
        for tx_hash, canceled in candidates:
            if canceled:
                self.ledger.mark_failed(authorization.key, "canceled", tx_hash)
                return
            receipt = self.client.receipt(tx_hash)
            if receipt is not None and receipt["status"] == 1 and \
                    expected in self.client.transfer_events(receipt) and \
                    receipt_used(receipt, self.client.token_address, authorization):
                self.ledger.mark_confirmed(authorization.key, tx_hash, int(receipt["blockNumber"]))
                return
        log.warning("nonce used on chain but its transaction not found: %s", authorization.key)



__all__ = [
    "CONFIRMED",
    "FAILED",
    "PENDING",
    "SETTLEMENTS_DB",
    "SUBMITTED",
    "Settlement",
    "SettlementEngine",
    "revert_reason_code",
]
