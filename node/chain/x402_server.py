"""The node's x402 resource server: its own skill listings for sale over plain HTTP.

Any x402 v2 client (the official SDKs, an agent framework) can buy a skill::

    GET /x402/skills/{listing_id}
        <- 402, PAYMENT-REQUIRED: base64(PaymentRequired)   (the same JSON in the body)
    GET /x402/skills/{listing_id}    PAYMENT-SIGNATURE: base64(PaymentPayload)
        <- 200, PAYMENT-RESPONSE: base64(SettleResponse), body: the skill (JSON)

A 402 offers two schemes (``accepts``): ``exact`` (one EIP-3009 transfer, settled
before delivery) and, where the chain has the channel contract, ``batch-settlement``
(a deposit into a channel once, then one cumulative voucher per request, delivered at
once; :mod:`node.chain.x402_channels`, the x402 SDK's server scheme). For ``exact`` the
seller settles the buyer's EIP-3009 authorization itself through the node's
settlement engine (no facilitator), so the same authorization never pays twice
and presenting it again returns the same delivery; a voucher presented again while
it is the channel's latest gets the same delivery too. ``GET /x402/skills`` lists the
offers. This is the node's one unauthenticated endpoint besides ``/metrics``: it
sells only what the node already announces to the whole network, and everything
in a request is treated as hostile (header size, encoding, terms, signature).
What a sale means (listing checks, the sale row) is the merchant's business
(:class:`X402Merchant`, implemented in ``node.market``); this module is HTTP.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from node.chain.authorization import Authorization
from node.chain.errors import ChainError, ChainUnavailable, PaymentRejected
from node.chain.x402 import (
    LEGACY_PAYMENT_HEADER,
    PAYMENT_REQUIRED_HEADER,
    PAYMENT_RESPONSE_HEADER,
    PAYMENT_SIGNATURE_HEADER,
    SCHEME_EXACT,
    authorization_from_payment,
    check_accepted,
    decode_payment_header,
    encode_header,
    payment_required,
    settle_response,
)
from node.chain.x402_channels import SCHEME_BATCH_SETTLEMENT, ChannelPaymentRefused
from node.errors import CrystalmeshError

log = logging.getLogger(__name__)

SKILLS_PATH = "/x402/skills"
# Payments settled at once; more are turned away (503) rather than queued without bound.
MAX_CONCURRENT_PAYMENTS = 16
_LISTING_ID = re.compile(r"[0-9a-f]{64}")


class ResourceUnavailable(CrystalmeshError):
    """The listing is not sold here (unknown, someone else's, withdrawn, expired)."""

    http_status = 404
    code = "not_for_sale"


@dataclass(frozen=True)
class Offer:
    """One listing as an x402 resource: its terms and what a buyer is told about it."""

    listing_id: str
    name: str
    description: str
    requirements: dict[str, Any]
    channel_requirements: dict[str, Any] | None = None

    @property
    def accepts(self) -> list[dict[str, Any]]:
        """The schemes a buyer may pay with, ``exact`` first (every x402 client speaks it)."""
        return [self.requirements] + ([self.channel_requirements] if self.channel_requirements else [])


@dataclass(frozen=True)
class Sold:
    """A paid (now or before) sale: the skill and the settlement that paid for it."""

    listing_id: str
    name: str
    payload: str
    content_hash: str
    tx_hash: str
    payer: str
    amount_micro: int
    chain_id: int
    receipt: dict[str, Any] | None = None  # the PAYMENT-RESPONSE content, if not the exact one


@dataclass(frozen=True)
class ChannelRefunded:
    """A ``batch-settlement`` refund request was carried out: nothing sold."""

    amount_micro: int
    receipt: dict[str, Any]


class X402Merchant(Protocol):
    async def offers(self) -> list[Offer]:
        """Everything for sale now."""

    async def offer(self, listing_id: str) -> Offer:
        """Terms for one listing; raises :class:`ResourceUnavailable`."""

    async def sell(self, offer: Offer, authorization: Authorization) -> Sold:
        """Settle and deliver, exactly once per authorization (a replay gets the same
        :class:`Sold`). Raises :class:`PaymentRejected`, :class:`ChainError`,
        :class:`ResourceUnavailable`."""

    async def sell_by_channel(self, offer: Offer, payment: dict[str, Any],
                              resource: dict[str, Any]) -> Sold | ChannelRefunded:
        """A ``batch-settlement`` payment (deposit, voucher or refund request): the voucher
        is recorded before the skill is returned. Raises :class:`ChannelPaymentRefused`
        (with its 402 body), :class:`PaymentRejected`, :class:`ChainError`,
        :class:`ResourceUnavailable`."""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _resource(request: Request, offer: Offer) -> dict[str, Any]:
    return {"url": str(request.url.replace(query="")), "description": offer.description,
            "mimeType": "application/json"}


def _payment_required(request: Request, offer: Offer, error: str | None = None,
                      channel_entry: dict[str, Any] | None = None) -> JSONResponse:
    """A 402 offering every scheme; ``channel_entry`` replaces the plain ``batch-settlement``
    terms with the SDK's enriched ones (the channel's state, for a client to resync)."""
    body = payment_required(offer.requirements, resource_url=str(request.url.replace(query="")),
                            description=offer.description, error=error)
    channel = channel_entry or offer.channel_requirements
    if channel is not None:
        body["accepts"] = [offer.requirements, channel]
    return JSONResponse(body, status_code=402, headers={PAYMENT_REQUIRED_HEADER: encode_header(body)})


def build_x402_app(merchant: X402Merchant) -> FastAPI:
    """The ASGI app (served by :func:`serve_x402`); no docs/OpenAPI routes: it is public."""
    app = FastAPI(title="crystalmesh x402", docs_url=None, redoc_url=None, openapi_url=None)
    limiter = trio.CapacityLimiter(MAX_CONCURRENT_PAYMENTS)

    @app.get(SKILLS_PATH)
    async def list_offers(request: Request) -> JSONResponse:
        base = str(request.url.replace(query="")).rstrip("/")
        items = [{"listing_id": offer.listing_id, "name": offer.name,
                  "description": offer.description, "url": f"{base}/{offer.listing_id}",
                  "accepts": offer.accepts} for offer in await merchant.offers()]
        return JSONResponse({"x402Version": 2, "resources": items})

    @app.get(SKILLS_PATH + "/{listing_id}")
    async def buy(listing_id: str, request: Request) -> JSONResponse:
        if not _LISTING_ID.fullmatch(listing_id):
            return _error(404, "not a listing id")
        try:
            offer = await merchant.offer(listing_id)
        except ResourceUnavailable as error:
            return _error(404, str(error))
        header = request.headers.get(PAYMENT_SIGNATURE_HEADER)
        if header is None:
            if request.headers.get(LEGACY_PAYMENT_HEADER) is not None:
                return _payment_required(request, offer, "x402 v1 payments are not accepted")
            return _payment_required(request, offer)
        if limiter.available_tokens < 1:
            return _error(503, "too many payments in progress, retry shortly")
        async with limiter:
            return await _settle(request, merchant, offer, header)

    return app


_REFUSALS = (PaymentRejected, ResourceUnavailable, ChainUnavailable, ChainError)


def _refused(request: Request, offer: Offer, error: Exception, scheme: str) -> JSONResponse:
    """What a refused payment answers, whichever scheme it came by: a payment we will not
    take or a settlement that failed asks again (402), an unknown skill is 404, a chain
    we cannot reach is 503 (nothing was taken)."""
    if isinstance(error, PaymentRejected):
        log.info("x402 payment refused scheme=%s listing=%s reason=%s", scheme,
                 offer.listing_id[:16], error.reason)
        return _payment_required(request, offer, str(error))
    if isinstance(error, ResourceUnavailable):
        return _error(404, str(error))
    if isinstance(error, ChainUnavailable):
        return _error(503, f"chain unavailable: {error}")
    return _payment_required(request, offer, f"settlement failed: {error}")


async def _settle(request: Request, merchant: X402Merchant, offer: Offer, header: str) -> JSONResponse:
    try:
        payment = decode_payment_header(header)
    except PaymentRejected as error:
        return _payment_required(request, offer, str(error))
    if payment["accepted"].get("scheme") == SCHEME_BATCH_SETTLEMENT and offer.channel_requirements:
        return await _settle_by_channel(request, merchant, offer, payment)
    try:
        check_accepted(payment["accepted"], offer.requirements)
        authorization = authorization_from_payment(payment["payload"])
        sold = await merchant.sell(offer, authorization)
    except _REFUSALS as error:
        return _refused(request, offer, error, SCHEME_EXACT)
    receipt = settle_response(tx_hash=sold.tx_hash, chain_id=sold.chain_id, payer=sold.payer,
                              amount_micro=sold.amount_micro)
    body = {"listing_id": sold.listing_id, "name": sold.name, "payload": sold.payload,
            "content_hash": sold.content_hash, "tx_hash": sold.tx_hash,
            "price_micro_usdc": sold.amount_micro}
    return JSONResponse(body, headers={PAYMENT_RESPONSE_HEADER: encode_header(receipt)})


async def _settle_by_channel(request: Request, merchant: X402Merchant, offer: Offer,
                             payment: dict[str, Any]) -> JSONResponse:
    assert offer.channel_requirements is not None
    try:
        check_accepted(payment["accepted"], offer.channel_requirements)
        outcome = await merchant.sell_by_channel(offer, payment, _resource(request, offer))
    except ChannelPaymentRefused as refused:
        accepts = refused.payment_required.get("accepts") or []
        entry = accepts[0] if accepts and isinstance(accepts[0], dict) else None
        return _payment_required(request, offer, refused.reason, channel_entry=entry)
    except _REFUSALS as error:
        return _refused(request, offer, error, SCHEME_BATCH_SETTLEMENT)
    if isinstance(outcome, ChannelRefunded):
        return JSONResponse({"refunded_micro_usdc": outcome.amount_micro},
                            headers={PAYMENT_RESPONSE_HEADER: encode_header(outcome.receipt)})
    body = {"listing_id": outcome.listing_id, "name": outcome.name, "payload": outcome.payload,
            "content_hash": outcome.content_hash, "tx_hash": outcome.tx_hash,
            "price_micro_usdc": outcome.amount_micro, "scheme": SCHEME_BATCH_SETTLEMENT}
    return JSONResponse(body, headers={PAYMENT_RESPONSE_HEADER: encode_header(outcome.receipt or {})})


async def serve_x402(app: FastAPI, host: str, port: int, *,
                     task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``app`` on ``host:port`` (0 = any free port); ``started`` with the base URL."""
    from hypercorn.config import Config as HypercornConfig
    from hypercorn.trio import serve

    config = HypercornConfig()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 1.0
    config.h11_max_incomplete_size = 16 * 1024  # request line + headers
    config.keep_alive_timeout = 5
    config.read_timeout = 30

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(functools.partial(serve, app, config))  # type: ignore[arg-type]
        log.info("x402 resource server url=%s", binds[0])
        task_status.started(binds[0])
