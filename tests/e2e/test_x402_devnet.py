"""x402 over HTTP on a devnet (anvil + node processes): the official x402 SDK's client,
unmodified, buys a skill from a node's x402 resource server, with ``exact`` and with
``batch-settlement`` (a channel deposit, then vouchers; a cooperative refund); hostile
payment headers are refused over real HTTP without moving money or writing a sale; the
same payment presented again gets the same delivery and no second charge."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.authorization import sign_authorization
from node.chain.localchain import fund
from node.chain.wallet import balances
from node.chain.x402 import payment_payload
from protocol.purchase import content_hash
from tests.support.devnet import Devnet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELLER = "node-1"
SKILL = ("Rotate a leaked API key: revoke it at the provider, issue a new one scoped to the same "
         "service, update the secret store, redeploy, and grep the logs for the old key's use")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("x402") / "devnet", 1) as net:
        yield net


@pytest.fixture(scope="module")
def listing(devnet: Devnet) -> dict[str, Any]:
    crystal = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public",
                              "--category", "security", SKILL, node=SELLER)
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.9",
                   node=SELLER)
    published: dict[str, Any] = devnet.cli_json("skill", "publish", crystal["id"], "--name",
                                                "rotate a leaked key", node=SELLER)
    return published


@pytest.fixture(scope="module")
def buyer(devnet: Devnet) -> LocalAccount:
    account: LocalAccount = Account.create()
    assert devnet.state is not None and devnet.state.chain is not None
    fund(devnet.state.chain.rpc_url, [account.address], usdc_micro=5_000_000, eth_wei=0,
         token_address=devnet.state.chain.token_address)
    return account


def x402_url(devnet: Devnet) -> str:
    url: str = devnet.cli_json("status", node=SELLER)["x402_url"]
    return url


def usdc(devnet: Devnet, address: str) -> int:
    assert devnet.state is not None and devnet.state.chain is not None
    chain = devnet.state.chain
    return balances(chain.rpc_url, chain.token_address, address)["usdc_micro"]


def sales(devnet: Devnet) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = devnet.cli_json("sales", node=SELLER)
    return rows


def header(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def test_status_and_devnet_status_show_the_x402_url(devnet: Devnet, listing: dict[str, Any]) -> None:
    url = x402_url(devnet)
    assert url.startswith("http://127.0.0.1:")
    rows = devnet.cli_json("devnet", "status")["nodes"]
    assert {row["name"]: row.get("x402_url") for row in rows}[SELLER] == url
    index = httpx.get(f"{url}/x402/skills", timeout=30).json()
    assert listing["listing_id"] in {item["listing_id"] for item in index["resources"]}


def test_unpaid_request_gets_402_with_x402_terms(devnet: Devnet, listing: dict[str, Any]) -> None:
    from x402.http.utils import decode_payment_required_header

    answer = httpx.get(f"{x402_url(devnet)}/x402/skills/{listing['listing_id']}", timeout=30)
    assert answer.status_code == 402
    required = decode_payment_required_header(answer.headers["PAYMENT-REQUIRED"])
    assert answer.json() == required.model_dump(by_alias=True, exclude_none=True)
    [terms, channel] = required.accepts
    assert devnet.state is not None and devnet.state.chain is not None
    assert (terms.scheme, terms.network, terms.amount) == (
        "exact", f"eip155:{devnet.state.chain.chain_id}", str(listing["price_micro_usdc"]))
    assert terms.asset.lower() == devnet.state.chain.token_address.lower()
    assert terms.extra == {"name": "USDC", "version": "2"}
    assert terms.max_timeout_seconds > 0
    seller_address = devnet.state.node(SELLER).wallet_address
    assert (channel.scheme, channel.network, channel.amount, channel.pay_to) == (
        "batch-settlement", terms.network, terms.amount, seller_address)
    assert channel.extra["receiverAuthorizer"] == seller_address
    assert channel.extra["withdrawDelay"] == 900


def test_hostile_payments_are_refused_and_change_nothing(
        devnet: Devnet, listing: dict[str, Any], buyer: LocalAccount) -> None:
    url = f"{x402_url(devnet)}/x402/skills/{listing['listing_id']}"
    assert devnet.state is not None and devnet.state.chain is not None
    chain = devnet.state.chain
    offered = httpx.get(url, timeout=30).json()["accepts"][0]
    price = int(offered["amount"])
    before = usdc(devnet, buyer.address), len(sales(devnet))

    def signed(**overrides: Any) -> dict[str, Any]:
        terms = {"to": offered["payTo"], "value_micro": price} | overrides
        authorization = sign_authorization(buyer, chain_id=chain.chain_id,
                                           token_address=chain.token_address, **terms)
        return payment_payload(authorization, offered)

    forged = signed()
    forged["payload"]["signature"] = "0x" + "11" * 65
    cases: dict[str, tuple[str, int]] = {
        "garbage": ("!!not base64!!", 402),
        "not json": (base64.b64encode(b"{{{").decode(), 402),
        "v1": (header({"x402Version": 1, "payload": {}, "accepted": {}}), 402),
        "forged signature": (header(forged), 402),
        "wrong amount": (header(signed(value_micro=price - 1)), 402),
        "wrong amount claimed": (header(signed(value_micro=price - 1)
                                        | {"accepted": offered | {"amount": str(price - 1)}}), 402),
        "wrong payTo": (header(signed(to=buyer.address)), 402),
        "wrong payTo claimed": (header(signed(to=buyer.address)
                                       | {"accepted": offered | {"payTo": buyer.address}}), 402),
        "wrong network": (header(signed() | {"accepted": offered | {"network": "eip155:8453"}}), 402),
        "expired": (header(signed(valid_before_s=1)), 402),
        "too long": ("A" * 9000, 402),
    }
    for name, (value, status) in cases.items():
        answer = httpx.get(url, headers={"PAYMENT-SIGNATURE": value}, timeout=30)
        assert answer.status_code == status, (name, answer.text)
        assert answer.json().get("error"), name
    try:
        oversized = httpx.get(url, headers={"PAYMENT-SIGNATURE": "A" * 60_000}, timeout=30)
        assert oversized.status_code in (400, 402, 413, 431)
    except httpx.TransportError:
        pass  # the server may also just close such a connection
    for path in ("not-a-listing", "ab" * 32, "../../v1/status", "AB" * 32):
        assert httpx.get(f"{x402_url(devnet)}/x402/skills/{path}", timeout=30).status_code == 404
    assert httpx.post(url, timeout=30).status_code == 405
    # Nothing moved, nothing written, and the server still answers.
    assert (usdc(devnet, buyer.address), len(sales(devnet))) == before
    assert httpx.get(url, timeout=30).status_code == 402


class Recording(httpx.AsyncBaseTransport):
    """Passes requests through, keeping the payment headers the SDK sent."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.payments: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "PAYMENT-SIGNATURE" in request.headers:
            self.payments.append(request.headers["PAYMENT-SIGNATURE"])
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_official_x402_client_buys_once_and_a_replay_is_not_charged(
        devnet: Devnet, listing: dict[str, Any], buyer: LocalAccount) -> None:
    from x402 import x402Client
    from x402.http.clients.httpx import x402AsyncTransport
    from x402.http.utils import decode_payment_response_header
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    url = f"{x402_url(devnet)}/x402/skills/{listing['listing_id']}"
    seller_address = devnet.state.node(SELLER).wallet_address  # type: ignore[union-attr]
    price = int(listing["price_micro_usdc"])
    before = usdc(devnet, buyer.address), usdc(devnet, seller_address), len(sales(devnet))

    client = x402Client()
    register_exact_evm_client(client, EthAccountSigner(buyer))
    recording = Recording()
    async with httpx.AsyncClient(transport=x402AsyncTransport(client, recording), timeout=60) as http:
        answer = await http.get(url)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert content_hash(body["payload"]) == body["content_hash"] == content_hash(SKILL)
    assert body["payload"] == SKILL
    receipt = decode_payment_response_header(answer.headers["PAYMENT-RESPONSE"])
    assert receipt.success and receipt.transaction == body["tx_hash"]
    assert receipt.payer and receipt.payer.lower() == buyer.address.lower()
    after = usdc(devnet, buyer.address), usdc(devnet, seller_address), len(sales(devnet))
    assert after == (before[0] - price, before[1] + price, before[2] + 1)
    [sale] = [row for row in sales(devnet) if row["tx_hash"] == body["tx_hash"]]
    assert sale["state"] == "delivered" and sale["price_micro_usdc"] == price
    assert sale["buyer_key"] == "x402:" + buyer.address

    # The same payment again, five times at once: the same delivery, no new charge or sale.
    [payment] = recording.payments
    replies: list[httpx.Response] = []

    async def replay() -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            replies.append(await http.get(url, headers={"PAYMENT-SIGNATURE": payment}))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(replay)
    assert [reply.status_code for reply in replies] == [200] * 5
    assert {reply.json()["tx_hash"] for reply in replies} == {body["tx_hash"]}
    assert (usdc(devnet, buyer.address), usdc(devnet, seller_address), len(sales(devnet))) == after


# --- batch-settlement: the SDK's channel client -----------------------------------------------------

async def test_sdk_channel_client_buys_with_vouchers_and_gets_its_deposit_back(
        devnet: Devnet, listing: dict[str, Any]) -> None:
    from x402 import x402Client
    from x402.http.clients.httpx import x402AsyncTransport
    from x402.http.utils import decode_payment_response_header
    from x402.mechanisms.evm.batch_settlement.client import (
        BatchSettlementDepositPolicy,
        BatchSettlementEvmScheme,
        BatchSettlementEvmSchemeOptions,
    )

    from node.chain.channels import Channels
    from node.chain.client import ChainClient

    assert devnet.state is not None and devnet.state.chain is not None
    chain = devnet.state.chain
    buyer: LocalAccount = Account.create()
    fund(chain.rpc_url, [buyer.address], usdc_micro=5_000_000, eth_wei=0, token_address=chain.token_address)
    url = f"{x402_url(devnet)}/x402/skills/{listing['listing_id']}"
    seller_address = devnet.state.node(SELLER).wallet_address
    price = int(listing["price_micro_usdc"])
    deposit = 10 * price
    sales_before, seller_before = len(sales(devnet)), usdc(devnet, seller_address)

    scheme = BatchSettlementEvmScheme(buyer, BatchSettlementEvmSchemeOptions(
        deposit_policy=BatchSettlementDepositPolicy(deposit_multiplier=10)))
    client = x402Client()
    client.register(f"eip155:{chain.chain_id}", scheme)  # only batch-settlement: it must pick it
    recording = Recording()
    receipts = []
    async with httpx.AsyncClient(transport=x402AsyncTransport(client, recording), timeout=60) as http:
        for _ in range(3):
            answer = await http.get(url)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["scheme"] == "batch-settlement" and body["payload"] == SKILL
            assert content_hash(body["payload"]) == body["content_hash"]
            receipts.append(decode_payment_response_header(answer.headers["PAYMENT-RESPONSE"]))
    # The first purchase deposits (a transaction), the next two are vouchers: no transaction.
    assert [bool(receipt.transaction) for receipt in receipts] == [True, False, False]
    assert [receipt.extra["channelState"]["chargedCumulativeAmount"] for receipt in receipts] == [
        str(price), str(2 * price), str(3 * price)]
    assert usdc(devnet, buyer.address) == 5_000_000 - deposit
    assert len(sales(devnet)) == sales_before + 3  # each voucher recorded before delivery
    assert usdc(devnet, seller_address) == seller_before  # nothing claimed yet
    # ``wallet channels`` shows the channel, read from the SDK's store.
    shown = devnet.cli_json("wallet", "channels", node=SELLER)["http_paid_by"]
    [paid] = [row for row in shown if row["payer"].lower() == buyer.address.lower()]
    assert (paid["charged_micro_usdc"], paid["unclaimed_micro_usdc"]) == (3 * price, 3 * price)

    # The last voucher again (a lost answer): the same delivery, no charge, no new sale.
    again = httpx.get(url, headers={"PAYMENT-SIGNATURE": recording.payments[-1]}, timeout=60)
    assert again.status_code == 200 and again.json()["payload"] == SKILL
    # An older voucher of the same channel is a replay.
    older = httpx.get(url, headers={"PAYMENT-SIGNATURE": recording.payments[-2]}, timeout=60)
    assert older.status_code == 402
    assert len(sales(devnet)) == sales_before + 3

    # The SDK client's cooperative refund: the seller claims the three vouchers and returns
    # the rest in one transaction; anyone may then move the claimed money to the seller.
    refund = await trio.to_thread.run_sync(scheme.refund, url)
    assert refund.success, refund
    assert usdc(devnet, buyer.address) == 5_000_000 - 3 * price
    relayer = Account.create()
    fund(chain.rpc_url, [relayer.address], usdc_micro=0, eth_wei=10**17, token_address=chain.token_address)
    channels = Channels(ChainClient.connect(chain.rpc_url, chain.token_address), relayer)
    await trio.to_thread.run_sync(channels.settle, seller_address)
    assert usdc(devnet, seller_address) == seller_before + 3 * price


def test_hostile_channel_payments_are_refused_and_record_nothing(
        devnet: Devnet, listing: dict[str, Any], buyer: LocalAccount) -> None:
    from node.chain.channels import channel_config, sign_channel_voucher

    assert devnet.state is not None and devnet.state.chain is not None
    chain = devnet.state.chain
    url = f"{x402_url(devnet)}/x402/skills/{listing['listing_id']}"
    offered = httpx.get(url, timeout=30).json()["accepts"][1]
    assert offered["scheme"] == "batch-settlement"
    config = channel_config(payer=buyer.address, receiver=offered["payTo"],
                            receiver_authorizer=offered["extra"]["receiverAuthorizer"],
                            token_address=chain.token_address)
    price = int(offered["amount"])
    before = usdc(devnet, buyer.address), len(sales(devnet))

    elsewhere = channel_config(payer=buyer.address, receiver=buyer.address, receiver_authorizer=buyer.address,
                               token_address=chain.token_address)

    def voucher_header(signer: LocalAccount, total: int, signed_total: int | None = None,
                       channel: Any = None, **payload: Any) -> str:
        channel = channel or config
        voucher = sign_channel_voucher(signer, channel, chain.chain_id, signed_total or total)
        inner = {"type": "voucher", "channelConfig": channel.to_dict(),
                 "voucher": {"channelId": voucher.channel_id, "maxClaimableAmount": str(total),
                             "signature": voucher.signature}} | payload
        return header({"x402Version": 2, "payload": inner, "accepted": offered})

    cases = {
        "no deposit behind it": voucher_header(buyer, price),
        "forged signature": voucher_header(Account.create(), price),
        "a channel paying someone else": voucher_header(buyer, price, channel=elsewhere),
        "not a voucher": header({"x402Version": 2, "payload": {"type": "voucher"}, "accepted": offered}),
        "huge total": voucher_header(buyer, 2**128 + price, signed_total=price),
        "deep": header({"x402Version": 2, "payload": {"voucher": {"a": [[[[[[[[1]]]]]]]]}}, "accepted": offered}),
        "wrong amount claimed": header({"x402Version": 2, "payload": {}, "accepted": offered | {"amount": "1"}}),
    }
    for name, value in cases.items():
        answer = httpx.get(url, headers={"PAYMENT-SIGNATURE": value}, timeout=30)
        assert answer.status_code == 402, (name, answer.text)
        assert answer.json().get("error"), name
    assert (usdc(devnet, buyer.address), len(sales(devnet))) == before
