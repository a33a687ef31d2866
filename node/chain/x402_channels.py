"""The seller's x402 ``batch-settlement`` payments over HTTP, on the x402 SDK's own resource
server.

The x402 resource endpoint (:mod:`node.chain.x402_server`) offers ``exact`` and
``batch-settlement`` side by side. A ``batch-settlement`` payment header is handled here by
the SDK's ``x402ResourceServerSync`` with its server scheme (channel bookkeeping: the
cumulative total the seller has charged per channel, corrective 402s when a client's total
is off, local ECDSA voucher checks) and an in-process SDK facilitator whose transactions the
node's wallet sends (:class:`node.chain.channels.ChainFacilitatorSigner`: deposits the buyer
signed, claims, refunds). Nothing of the scheme is re-implemented.

The SDK's per-channel records are kept in its ``FileChannelStorage`` under the node's data
directory (atomic file replace per update), so the charged total survives a restart; the
seller's durable *voucher* record (what it claims later) is written by the caller after
:meth:`ChannelPayments.settle` and before anything is delivered.

Blocking, sync web3: call from worker threads.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from pydantic import ValidationError
from x402 import x402FacilitatorSync, x402ResourceServerSync
from x402.mechanisms.evm.batch_settlement.authorizer_signer import LocalAuthorizerSigner
from x402.mechanisms.evm.batch_settlement.facilitator import BatchSettlementEvmFacilitator
from x402.mechanisms.evm.batch_settlement.server import (
    BatchSettlementEvmScheme,
    BatchSettlementEvmSchemeServerConfig,
    FileChannelStorage,
)
from x402.mechanisms.evm.batch_settlement.types import is_refund_payload
from x402.schemas import (
    AssetAmount,
    PaymentPayload,
    PaymentRequirements,
    ResourceConfig,
    ResourceInfo,
)
from x402.schemas.errors import PaymentAbortedError

from node.chain.channels import (
    CHANNEL_CONTRACT_ADDRESS,
    DEFAULT_WITHDRAW_DELAY_S,
    ChainFacilitatorSigner,
)
from node.chain.client import ChainClient
from node.chain.errors import ChainError, PaymentRejected
from node.chain.x402 import network_id
from protocol.codec import json_too_deep

log = logging.getLogger(__name__)

# A channel record is a few hundred bytes, four levels deep; anything else in the directory
# was not written by the SDK and is skipped before its JSON is parsed.
_RECORD_MAX_BYTES = 64 * 1024
_RECORD_MAX_DEPTH = 8

SCHEME_BATCH_SETTLEMENT = "batch-settlement"
CHANNEL_WITHDRAWING = "channel_withdrawing"
# How long a "no channel contract on this chain" answer is believed before asking again.
_ABSENT_RECHECK_S = 60.0


class ChannelPaymentRefused(ChainError):
    """A ``batch-settlement`` payment was not accepted; ``payment_required`` is the 402 body
    to answer with (the SDK's, with the channel's state when the client's total was off)."""

    http_status = 402
    code = "channel_payment_refused"

    def __init__(self, reason: str, payment_required: dict[str, Any]) -> None:
        self.reason = reason
        self.payment_required = payment_required
        super().__init__(f"channel payment refused: {reason}")


@dataclass(frozen=True)
class VerifiedChannelPayment:
    """A payment the SDK verified and reserved on its channel (settle or cancel it next).

    ``refund``: the buyer asks for its unused deposit back; nothing is sold.
    """

    payload: PaymentPayload
    requirements: PaymentRequirements
    channel_id: str
    payer: str
    max_claimable_micro: int
    signature: str
    refund: bool


@dataclass(frozen=True)
class ChannelSettlement:
    """What :meth:`ChannelPayments.settle` did: the SDK's SettleResponse (JSON, the
    PAYMENT-RESPONSE header's content) and the amounts in it."""

    response: dict[str, Any]
    transaction: str
    charged_micro: int
    charged_total_micro: int


class ChannelPayments:
    """``batch-settlement`` for one seller wallet on one chain."""

    def __init__(self, client: ChainClient, wallet: LocalAccount, chain_id: int, storage_dir: Path,
                 withdraw_delay_s: int = DEFAULT_WITHDRAW_DELAY_S,
                 onchain_state_ttl_ms: int | None = None) -> None:
        """``onchain_state_ttl_ms``: how old the SDK's copy of a channel's chain state may be
        for a voucher to be checked without an RPC (the SDK's default: a third of the
        withdraw delay, 30 s – 5 min; a withdrawal is noticed within it, well inside the delay)."""
        self.client = client
        self.wallet = wallet
        self.network = network_id(chain_id)  # from config: the chain may be down at start
        storage_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.storage_dir = storage_dir
        self.facilitator = x402FacilitatorSync()
        self.facilitator.register(
            [self.network], BatchSettlementEvmFacilitator(ChainFacilitatorSigner(client, wallet)))
        self.scheme = BatchSettlementEvmScheme(wallet.address, BatchSettlementEvmSchemeServerConfig(
            storage=FileChannelStorage(str(storage_dir)),
            receiver_authorizer_signer=LocalAuthorizerSigner(wallet),
            withdraw_delay=withdraw_delay_s, onchain_state_ttl_ms=onchain_state_ttl_ms))
        self.server = x402ResourceServerSync(self.facilitator)
        # The SDK's own annotations disagree (payment_flows' dict vs its Mapping protocol).
        self.server.register(self.network, self.scheme)  # type: ignore[arg-type]
        self.server.initialize()
        self._available_lock = threading.Lock()
        self._available: tuple[bool, float] | None = None

    def available(self) -> bool:
        """Whether the channel contract exists at the SDK's address on this chain (cached;
        a chain without it gets ``exact`` only)."""
        with self._available_lock:
            if self._available is not None:
                present, checked_at = self._available
                if present or time.monotonic() - checked_at < _ABSENT_RECHECK_S:
                    return present
            try:
                present = len(self.client.w3.eth.get_code(CHANNEL_CONTRACT_ADDRESS)) > 0
            except Exception as error:
                log.info("channel contract check failed: %s", error)
                present = False
            self._available = (present, time.monotonic())
            return present

    def requirements(self, *, pay_to: str, price_micro: int, max_timeout_s: int) -> dict[str, Any]:
        """The ``batch-settlement`` entry of a 402's ``accepts`` (x402 JSON field names)."""
        if to_checksum_address(pay_to) != to_checksum_address(self.wallet.address):
            raise ValueError("a channel pays the node's wallet: pay_to must be its address")
        [built] = self.server.build_payment_requirements(ResourceConfig(
            scheme=SCHEME_BATCH_SETTLEMENT, pay_to=to_checksum_address(pay_to), network=self.network,
            price=AssetAmount(amount=str(int(price_micro)), asset=self.client.token_address),
            max_timeout_seconds=int(max_timeout_s)))
        return built.model_dump(by_alias=True, exclude_none=True)

    def verify(self, payment: dict[str, Any], offered: dict[str, Any], resource: dict[str, Any]) -> VerifiedChannelPayment:
        """Check a ``batch-settlement`` payment against the terms we offered and reserve it on
        its channel. Raises :class:`ChannelPaymentRefused` with the 402 body to send."""
        requirements = PaymentRequirements.model_validate(offered)
        try:
            payload = PaymentPayload.model_validate(payment)
        except ValidationError as error:
            raise PaymentRejected("malformed", "not a batch-settlement payment payload") from error
        try:
            verdict = self.server.verify_payment(payload, requirements)
        except PaymentAbortedError as aborted:
            raise self._refused(aborted.reason, requirements, resource, payload) from aborted
        except (ValueError, KeyError, TypeError) as error:
            raise PaymentRejected("malformed", f"batch-settlement payload: {error}"[:200]) from error
        if not verdict.is_valid:
            raise self._refused(verdict.invalid_reason or "invalid", requirements, resource, payload)
        raw = payload.payload
        refund = is_refund_payload(raw)
        withdrawing = int((verdict.verify.extra or {}).get("withdrawRequestedAt") or 0)
        if withdrawing and not refund:
            # The payer is taking its deposit back: a voucher now could be claimed too late.
            self.scheme.clear_pending_request(payload)
            raise self._refused(CHANNEL_WITHDRAWING, requirements, resource, None)
        voucher = raw["voucher"]
        return VerifiedChannelPayment(
            payload=payload, requirements=requirements, channel_id=str(voucher["channelId"]).lower(),
            payer=to_checksum_address(str(verdict.verify.payer)),
            max_claimable_micro=int(voucher["maxClaimableAmount"]), signature=str(voucher["signature"]),
            refund=refund)

    def cancel(self, verified: VerifiedChannelPayment) -> None:
        """Release a verified payment that will not be settled (the resource vanished)."""
        self.scheme.clear_pending_request(verified.payload)

    def settle(self, verified: VerifiedChannelPayment) -> ChannelSettlement:
        """Commit the payment on its channel: a voucher is recorded in the SDK's channel state
        (no transaction), a deposit is submitted and mined, a refund claims and refunds."""
        response = self.server.settle_payment(verified.payload, verified.requirements)
        if not response.success:
            raise ChainError(f"channel settlement failed: {response.error_reason}")
        extra = response.extra or {}
        state = extra.get("channelState") or {}
        return ChannelSettlement(
            response=response.model_dump(by_alias=True, exclude_none=True),
            transaction=response.transaction or "",
            charged_micro=int(extra.get("chargedAmount") or 0),
            charged_total_micro=int(state.get("chargedCumulativeAmount") or 0))

    def replay_receipt(self, channel_id: str, total_micro: int, price_micro: int,
                       payer: str) -> dict[str, Any] | None:
        """The PAYMENT-RESPONSE of a voucher already settled, if it is still the channel's
        latest (a client whose answer was lost sends it again: it gets the same delivery and
        is not charged twice). None if the channel has moved past it or is unknown."""
        channel = self.scheme.get_storage().get(channel_id)
        if channel is None or int(channel.charged_cumulative_amount) != int(total_micro):
            return None
        return {"success": True, "transaction": "", "network": self.network,
                "payer": to_checksum_address(payer), "amount": "",
                "extra": {"chargedAmount": str(int(price_micro)), "channelState": {
                    "channelId": channel.channel_id, "balance": channel.balance,
                    "totalClaimed": channel.total_claimed,
                    "withdrawRequestedAt": channel.withdraw_requested_at,
                    "refundNonce": str(channel.refund_nonce),
                    "chargedCumulativeAmount": channel.charged_cumulative_amount}}}

    def channels(self) -> dict[str, Any]:
        """The channels that paid this seller over HTTP, as the SDK's store holds them."""
        return http_channel_records(self.storage_dir)

    def claim_and_settle(self) -> dict[str, Any]:
        """Claim every voucher the SDK holds for this seller in one transaction per batch, then
        move the claimed money to the wallet (the SDK's channel manager)."""
        manager = self.scheme.create_channel_manager_sync(self.facilitator, self.network)
        return dict(manager.claim_and_settle())

    def _refused(self, reason: str, requirements: PaymentRequirements, resource: dict[str, Any],
                 payload: PaymentPayload | None) -> ChannelPaymentRefused:
        log.info("channel payment refused reason=%s", reason)
        body = self.server.create_payment_required_response(
            [requirements], ResourceInfo.model_validate(resource), error=reason, payment_payload=payload)
        return ChannelPaymentRefused(reason, body.model_dump(by_alias=True, exclude_none=True))


def http_channel_records(storage_dir: Path) -> dict[str, Any]:
    """``{"channels": [...], "unreadable": n}``: each channel of the x402 endpoint (read with
    the SDK's ``FileChannelStorage``, the store its server scheme writes) as ``wallet
    channels`` shows a channel that pays this node: deposit, charged, claimed, unclaimed,
    withdrawal. A file the SDK could not have written (too big, too deep, not a record) is
    counted in ``unreadable``, never parsed into a crash."""
    storage = FileChannelStorage(str(storage_dir))
    records = storage_dir / "server"
    rows: list[dict[str, Any]] = []
    unreadable = 0
    if not records.is_dir():
        return {"channels": rows, "unreadable": 0}
    for entry in sorted(records.glob("*.json")):
        try:
            if entry.stat().st_size > _RECORD_MAX_BYTES or json_too_deep(
                    entry.read_bytes(), _RECORD_MAX_DEPTH):
                unreadable += 1
                continue
            channel = storage.get(entry.stem)
            if channel is None:
                continue
            charged, claimed = int(channel.charged_cumulative_amount), int(channel.total_claimed)
            rows.append({
                "channel_id": channel.channel_id.lower(), "payer": channel.channel_config.payer,
                "deposit_micro_usdc": int(channel.balance), "charged_micro_usdc": charged,
                "claimed_micro_usdc": claimed, "unclaimed_micro_usdc": max(0, charged - claimed),
                "withdraw_requested_at_s": int(channel.withdraw_requested_at),
                "withdraw_delay_s": int(channel.channel_config.withdraw_delay),
                "last_request_at_ms": int(channel.last_request_timestamp)})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.info("x402 channel record unreadable file=%s error=%s", entry.name, error)
            unreadable += 1
    return {"channels": rows, "unreadable": unreadable}
