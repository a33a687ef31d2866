"""Errors of the chain layer, each meaning one thing to the caller."""

from __future__ import annotations

from node.errors import CrystalmeshError


class ChainError(CrystalmeshError, RuntimeError):
    http_status = 502
    code = "chain"

    """Base class of chain-layer errors."""


class ChainUnavailable(ChainError):
    """The RPC endpoint cannot be reached (or answers for the wrong chain).

    Nothing has been recorded as settled when this is raised.
    """


class LocalChainError(ChainError):
    """The local devnet chain (anvil) cannot be found, started or deployed to."""


class SettlementFailed(ChainError):
    """A settlement transaction was mined but did not move the money as authorized."""


class PaymentRejected(ChainError):
    http_status = 409

    """An authorization is not acceptable as payment; ``reason`` says why.

    Reasons: ``bad_signature``, ``wrong_payee``, ``wrong_amount``, ``expired``,
    ``not_yet_valid``, ``replayed``, ``insufficient_balance``, ``malformed``;
    over x402 HTTP also ``wrong_scheme``, ``wrong_network``, ``wrong_asset``.
    """

    REASONS = frozenset(
        {
            "bad_signature",
            "wrong_payee",
            "wrong_amount",
            "expired",
            "not_yet_valid",
            "replayed",
            "insufficient_balance",
            "malformed",
            "wrong_scheme",
            "wrong_network",
            "wrong_asset",
        }
    )

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        self.reason = reason
        self.detail = detail
        super().__init__(f"payment rejected: {reason}" + (f" ({detail})" if detail else ""))
