"""What the voucher exchange needs from the chain, and nothing more.

The implementation is the chain package's channel facade (``node.chain``: a sync wrapper over
the x402 SDK's batch-settlement facilitator code against the contract at its canonical
address). The purchase code depends on this small interface only, so a node without a channel
contract simply has none (``None``) and pays and sells with ``exact``.

Every method blocks (web3): call it from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class OnChainChannel:
    """``channels(channelId)`` + ``pendingWithdrawals`` as the contract shows them now."""

    balance: int
    total_claimed: int
    withdraw_requested_at_s: int


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
    def channel(self, channel_id: str) -> OnChainChannel:
        """Read the channel (one multicall)."""

    def deposit(self, payload: dict[str, Any], requirements: dict[str, Any]) -> str:
        """Submit a buyer's x402 ``deposit`` payload; the mined transaction's hash."""

    def claim(self, entries: list[ClaimEntry],
              on_signed: Any = None) -> ChainOutcome:
        """Claim ``entries`` in one transaction and move the claimed money to the receiver.
        ``on_signed(tx_hash)`` runs after signing and before broadcasting (the journal)."""

    def refund(self, entry: ClaimEntry) -> tuple[ChainOutcome, int]:
        """Claim the channel up to ``entry`` and return the rest of the deposit to the payer
        (cooperative refund): the outcome and the amount refunded."""
