"""How a purchase fails, and which seller refusals prove no money moved."""

from __future__ import annotations

from typing import NamedTuple

from node.errors import CrystalmeshError

# Seller refusals that prove it did not (and will not) settle the authorization
# (``terms_changed``: it answered TermsChanged; ``terms_mismatch``: its answer contradicts
# its own signed listing, so the buyer stopped before paying).
DEFINITIVE_REFUSALS = frozenset({"payment_invalid", "not_for_sale", "unknown_listing",
                                 "bad_request", "price_changed", "terms_changed",
                                 "terms_mismatch"})


class PurchaseError(CrystalmeshError, RuntimeError):
    """A purchase did not complete; ``money_moved`` says whether USDC left the wallet."""

    http_status = 502

    def __init__(self, message: str, code: str = "purchase_failed", money_moved: bool = False,
                 phase: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.money_moved = money_moved
        # The step it failed in (``node.net.progress.PHASES``): dial, circuit, answer, verify…
        self.phase = phase


class PurchaseRefused(PurchaseError):
    """Refused before any money was committed (caps, gate, unknown listing, seller said no)."""

    http_status = 409

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message, code, money_moved=False)


class Refusal(NamedTuple):
    """Why a listing is not for sale: a protocol error code and a one-line message."""

    code: str
    message: str
