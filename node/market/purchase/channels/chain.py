"""What the voucher exchange needs from the chain, and nothing more.

The implementation is the chain package's channel facade (``node.chain``: a sync wrapper over
the x402 SDK's batch-settlement facilitator code against the contract at its canonical
address). The purchase code depends on this small interface only, so a node without a channel
contract simply has none (``None``) and pays and sells with ``exact``.

Every method blocks (web3): call it from a worker thread.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from x402.mechanisms.evm.batch_settlement import ChannelConfig, DepositPayload
from x402.schemas import PaymentRequirements

from node.chain import CHANNEL_CONTRACT_ADDRESS, Channels, SignedVoucher


@dataclass(frozen=True)
class OnChainChannel:
    """``channels(channelId)`` + ``pendingWithdrawals`` as the contract shows them now."""

    balance: int
    total_claimed: int
    withdraw_requested_at_s: int
    withdraw_amount: int = 0


@dataclass(frozen=True)
class ClaimEntry:
    """One channel in a claim: the terms (x402 ``ChannelConfig`` dict), the newest voucher."""

    channel_id: str
    config: dict[str, Any]
    total: int
    signature: str


@dataclass(frozen=True)
class ChainOutcome:
    tx_hash: str
    gas_used: int
    mined: bool


class ChannelChain(Protocol):
    def available(self) -> bool:
        """Whether the chain has the channel contract (else: exact only)."""

    def channel(self, channel_id: str) -> OnChainChannel:
        """Read the channel (one multicall)."""

    def deposit(self, payload: dict[str, Any], requirements: dict[str, Any]) -> str:
        """Submit a buyer's x402 ``deposit`` payload; the mined transaction's hash."""

    def claim(self, entries: list[ClaimEntry]) -> ChainOutcome:
        """Claim ``entries`` in one transaction and move the claimed money to the receiver."""

    def refund(self, entry: ClaimEntry) -> tuple[ChainOutcome, int]:
        """Claim the channel up to ``entry`` and return the rest of the deposit to the payer
        (cooperative refund): the outcome and the amount refunded."""

    def initiate_withdraw(self, config: dict[str, Any], amount: int) -> str:
        """The payer starts the timed withdrawal of ``amount`` (its transaction, our gas)."""

    def finalize_withdraw(self, config: dict[str, Any]) -> str:
        """The payer completes it once the delay has passed (the contract refuses before)."""


class FacadeChannels:
    """:class:`ChannelChain` over the chain package's channel face (``node.chain.Channels``,
    the x402 SDK's facilitator): reads, the buyer's deposit, claims followed by the settle
    that moves the claimed money to our wallet, cooperative refunds."""

    def __init__(self, channels: Channels) -> None:
        self.channels = channels
        self._available_checked_at = -math.inf
        self._available = False
        self._checking = threading.Lock()

    def available(self) -> bool:
        """The contract's code is at its address (checked once; a miss is re-checked each
        minute, so a devnet that gets the contract later is noticed). Callers that arrive
        while the check runs wait for its answer: a seller's first buyers ask at once, and a
        "no" would send each of them to ``exact`` for an hour."""
        if self._available:
            return True
        with self._checking:
            if self._available or time.monotonic() - self._available_checked_at < 60.0:
                return self._available
            try:
                self._available = len(self.channels.signer.get_code(CHANNEL_CONTRACT_ADDRESS)) > 0
            except Exception:  # the chain is down: not now
                self._available = False
            self._available_checked_at = time.monotonic()
            return self._available

    def channel(self, channel_id: str) -> OnChainChannel:
        state = self.channels.state(channel_id)
        return OnChainChannel(balance=state.balance_micro, total_claimed=state.total_claimed_micro,
                              withdraw_requested_at_s=state.withdraw_requested_at_s,
                              withdraw_amount=state.withdraw_amount_micro)

    def initiate_withdraw(self, config: dict[str, Any], amount: int) -> str:
        return self.channels.initiate_withdraw(ChannelConfig.from_dict(config), amount)

    def finalize_withdraw(self, config: dict[str, Any]) -> str:
        return self.channels.finalize_withdraw(ChannelConfig.from_dict(config))

    def deposit(self, payload: dict[str, Any], requirements: dict[str, Any]) -> str:
        response = self.channels.deposit(DepositPayload.from_dict(payload),
                                         PaymentRequirements.model_validate(requirements))
        return str(response.transaction)

    def claim(self, entries: list[ClaimEntry]) -> ChainOutcome:
        tx_hash = self.channels.claim([_voucher(entry) for entry in entries])
        gas = self._gas(tx_hash)
        settle_tx, _ = self.channels.settle()
        if settle_tx:
            gas += self._gas(settle_tx)
        return ChainOutcome(tx_hash=tx_hash, gas_used=gas, mined=True)

    def refund(self, entry: ClaimEntry) -> tuple[ChainOutcome, int]:
        tx_hash, refunded = self.channels.refund(_voucher(entry))
        gas = self._gas(tx_hash)
        settle_tx, _ = self.channels.settle()
        if settle_tx:
            gas += self._gas(settle_tx)
        return ChainOutcome(tx_hash=tx_hash, gas_used=gas, mined=True), refunded

    def _gas(self, tx_hash: str) -> int:
        receipt = self.channels.client.receipt(tx_hash)
        return int(receipt["gasUsed"]) if receipt is not None else 0


def _voucher(entry: ClaimEntry) -> SignedVoucher:
    return SignedVoucher(channel=ChannelConfig.from_dict(entry.config), channel_id=entry.channel_id,
                         max_claimable_micro=entry.total, signature=entry.signature)
