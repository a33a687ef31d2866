"""x402 over HTTP, the pure parts: our 402 body and headers read by the official SDK,
hostile PAYMENT-SIGNATURE headers, the buyer's ``accepted`` terms, and the libp2p
quote carrying the token's EIP-712 domain (x402 ``extra``)."""

from __future__ import annotations

import base64
import dataclasses
import json
import time

import pytest
from eth_account import Account
from x402.http.utils import decode_payment_required_header, encode_payment_signature_header
from x402.mechanisms.evm.exact import ExactEvmClientScheme
from x402.schemas import PaymentPayload, PaymentRequired, PaymentRequirements

from node.chain.authorization import Authorization, check_authorization
from node.chain.errors import PaymentRejected
from node.chain.x402 import (
    MAX_PAYMENT_HEADER_CHARS,
    authorization_from_payment,
    check_accepted,
    decode_payment_header,
    encode_header,
    payment_required,
    payment_requirements,
    requirements_from_terms,
    settle_response,
)
from node.config import BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC
from node.market.purchase.x402_seller import x402_request_id
from protocol.messages import PaymentRequirements as Terms
from protocol.messages import TokenDomain

PAY_TO = "0x" + "ab" * 20
PRICE = 12_345
BUYER = Account.from_key("0x" + "11" * 32)


def offered() -> dict[str, object]:
    return payment_requirements(chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=BASE_SEPOLIA_USDC,
                                pay_to=PAY_TO, price_micro=PRICE)


def signed_header(requirements: dict[str, object] | None = None) -> str:
    terms = PaymentRequirements.model_validate(requirements or offered())
    inner = ExactEvmClientScheme(BUYER).create_payment_payload(terms)
    payload = PaymentPayload(payload=inner, accepted=terms)
    return encode_payment_signature_header(payload)


def test_payment_required_is_what_the_sdk_reads() -> None:
    body = payment_required(offered(), resource_url="http://127.0.0.1:1/x402/skills/ab",
                            description="triage a flaky CI job")
    parsed = decode_payment_required_header(encode_header(body))
    assert isinstance(parsed, PaymentRequired) and parsed == PaymentRequired.model_validate(body)
    [terms] = parsed.accepts
    assert (terms.scheme, terms.network, terms.amount, terms.max_timeout_seconds) == (
        "exact", "eip155:84532", "12345", 300)
    assert terms.extra == {"name": "USDC", "version": "2"}
    assert terms.pay_to.lower() == PAY_TO and terms.asset == BASE_SEPOLIA_USDC
    assert payment_required(offered(), resource_url="u", description="d", error="x")["error"] == "x"


def test_settle_response_is_an_sdk_settle_response() -> None:
    from x402.http.utils import decode_payment_response_header

    receipt = settle_response(tx_hash="0x" + "cd" * 32, chain_id=84532, payer=BUYER.address,
                              amount_micro=PRICE)
    parsed = decode_payment_response_header(encode_header(receipt))
    assert parsed.success and parsed.network == "eip155:84532" and parsed.amount == "12345"


def test_sdk_payment_header_decodes_to_a_verifiable_authorization() -> None:
    payment = decode_payment_header(signed_header())
    check_accepted(payment["accepted"], offered())
    authorization = authorization_from_payment(payment["payload"])
    check_authorization(authorization, chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=BASE_SEPOLIA_USDC,
                        pay_to=PAY_TO, price_micro=PRICE)
    assert authorization.from_address == BUYER.address


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize("header", [
    "",
    "not base64 at all!",
    _b64(b"\xff\xfe not utf-8"),
    _b64(b"{not json"),
    _b64(b"[1, 2, 3]"),
    _b64(json.dumps({"x402Version": 1, "payload": {}, "accepted": {}}).encode()),
    _b64(json.dumps({"x402Version": 2, "payload": {}}).encode()),
    _b64(json.dumps({"x402Version": 2, "payload": [], "accepted": {}}).encode()),
    _b64(json.dumps({"x402Version": 2, "payload": {"a": [[[[[[[[[[1]]]]]]]]]]}, "accepted": {}}).encode()),
    _b64(b"[" * 100_000),
    _b64(b"[" * 6_000),
    "A" * (MAX_PAYMENT_HEADER_CHARS + 4),
])
def test_hostile_payment_headers_are_malformed(header: str) -> None:
    with pytest.raises(PaymentRejected) as caught:
        decode_payment_header(header)
    assert caught.value.reason == "malformed"


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("scheme", "upto", "wrong_scheme"),
    ("network", "eip155:8453", "wrong_network"),
    ("asset", "0x" + "99" * 20, "wrong_asset"),
    ("payTo", "0x" + "98" * 20, "wrong_payee"),
    ("amount", "12344", "wrong_amount"),
    ("amount", 12345, "wrong_amount"),
])
def test_accepted_terms_must_be_ours(field: str, value: object, reason: str) -> None:
    accepted = {**offered(), field: value}
    with pytest.raises(PaymentRejected) as caught:
        check_accepted(accepted, offered())
    assert caught.value.reason == reason


def test_forged_payload_fields_are_malformed_not_crashes() -> None:
    payment = decode_payment_header(signed_header())
    for inner in ({}, {"authorization": []}, {"authorization": {}, "signature": {}},
                  {**payment["payload"], "signature": "0x12"},
                  {**payment["payload"], "authorization": {**payment["payload"]["authorization"],
                                                           "value": "9" * 5000}}):
        with pytest.raises(PaymentRejected):
            authorization_from_payment(inner)


def test_libp2p_quote_carries_the_token_domain_x402_needs() -> None:
    now = int(time.time())
    terms = Terms(request_id="00" * 16, listing_id="ab" * 32, scheme="exact", price_micro_usdc=PRICE,
                  pay_to=PAY_TO, asset=BASE_SEPOLIA_USDC, chain_id=BASE_SEPOLIA_CHAIN_ID,
                  valid_before_s=now + 300, content_hash="cd" * 32,
                  extra=TokenDomain(name="USDC", version="2"))
    assert requirements_from_terms(terms, now) == offered()
    # A token the SDK has no table entry for: the client can sign only with our extra.
    token = "0x" + "22" * 20
    requirements = requirements_from_terms(dataclasses.replace(terms, asset=token), now)
    with pytest.raises(ValueError, match=r"EIP-712 domain"):
        signed_header({**requirements, "extra": {}})
    header = signed_header(requirements)
    authorization = authorization_from_payment(decode_payment_header(header)["payload"])
    check_authorization(authorization, chain_id=BASE_SEPOLIA_CHAIN_ID, token_address=token,
                        pay_to=PAY_TO, price_micro=PRICE)


def test_request_id_names_one_authorization() -> None:
    def authorization(nonce: bytes) -> Authorization:
        return Authorization(from_address=BUYER.address, to=PAY_TO, value_micro=PRICE, valid_after_s=0,
                             valid_before_s=10, nonce=nonce, signature=bytes(65))

    first = x402_request_id(authorization(b"\x01" * 32))
    assert first == x402_request_id(authorization(b"\x01" * 32))
    assert first != x402_request_id(authorization(b"\x02" * 32))
    assert len(first) == 32 and int(first, 16) >= 0


def test_buyer_refuses_terms_under_another_token_domain() -> None:
    from node.market.book.listings import StoredListing
    from node.market.purchase.errors import PurchaseRefused
    from node.market.purchase.terms import check_requirements
    from protocol.identity import Identity
    from tests.support.net import make_listing

    listing = make_listing(Identity.generate(), now_ms=int(time.time() * 1000))
    stored = StoredListing(listing=listing, seller_key=b"\x01" * 32, issued_at_ms=0, received_at_ms=0,
                           superseded_by=None, own_crystal_id=None, envelope=b"")
    terms = Terms(request_id="00" * 16, listing_id=listing.listing_id, scheme="exact",
                  price_micro_usdc=listing.price_micro_usdc, pay_to=listing.pay_to,
                  asset=listing.token_address, chain_id=listing.chain_id,
                  valid_before_s=int(time.time()) + 300, content_hash=listing.content_hash,
                  extra=TokenDomain(name="USDC", version="2"))
    check_requirements(stored, terms)
    with pytest.raises(PurchaseRefused, match="token domain"):
        check_requirements(stored, dataclasses.replace(terms, extra=TokenDomain("USD Coin", "2")))


@pytest.mark.parametrize("raised, status, says", [
    ("rejected", 402, "replayed"),
    ("unavailable", 404, "withdrawn"),
    ("chain_down", 503, "chain unavailable"),
    ("chain_error", 402, "settlement failed"),
])
async def test_a_refused_payment_answers_what_the_buyer_can_act_on(raised: str, status: int,
                                                                   says: str) -> None:
    """Whichever way a sale fails, the HTTP answer says so: pay again (402), not sold
    here (404), the chain is out of reach and nothing was taken (503). The merchant is a
    double raising what the real one raises; the payment header is the SDK's own."""
    import httpx

    from node.chain.errors import ChainError, ChainUnavailable
    from node.chain.x402_server import SKILLS_PATH, Offer, ResourceUnavailable, build_x402_app

    error = {"rejected": PaymentRejected("replayed"),
             "unavailable": ResourceUnavailable("the listing was withdrawn"),
             "chain_down": ChainUnavailable("rpc refused the connection"),
             "chain_error": ChainError("transfer reverted")}[raised]
    listing_id = "ab" * 32
    offer = Offer(listing_id=listing_id, name="n", description="d", requirements=offered())

    class RefusingMerchant:
        async def offers(self) -> list[Offer]:
            return [offer]

        async def offer(self, wanted: str) -> Offer:
            return offer

        async def sell(self, offer: Offer, authorization: Authorization) -> object:
            raise error  # type: ignore[misc]

        async def sell_by_channel(self, *args: object) -> object:
            raise error  # type: ignore[misc]

    app = build_x402_app(RefusingMerchant())  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
        answer = await client.get(f"{SKILLS_PATH}/{listing_id}",
                                  headers={"PAYMENT-SIGNATURE": signed_header()})
    assert answer.status_code == status
    body = answer.json()
    assert says in (body.get("error") or "")
