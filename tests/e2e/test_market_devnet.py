"""Issue 5 end to end on a devnet (anvil + management + 3 node processes):
A publishes, B searches and buys with USDC, C is unaffected; then the failure
paths, each with a clear error and consistent ledgers and balances."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
import trio

from node.chain.authorization import sign_authorization
from node.chain.wallet import load_wallet
from node.config import load_config
from node.keys import load_identity
from node.market.purchase.wire import payment_message
from protocol.envelope import open_envelope, seal
from protocol.messages import (
    ErrorReply,
    PaymentAuthorization,
    PurchaseRequest,
    listing_id_for,
    new_request_id,
)
from tests.support.devnet import Devnet, known_everywhere, publish, usdc
from tests.support.net import make_net
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

A, B, C = "node-1", "node-2", "node-3"
SKILL = ("Triage a flaky CI job: rerun it three times, diff the environment of the failing runs, "
         "pin the dependency that changed, and file the upstream bug")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("market") / "devnet", 3) as net:
        yield net


def test_publish_search_buy_and_balances(devnet: Devnet) -> None:
    refused = devnet.cli("skill", "publish",
                         devnet.cli_json("memory", "add", "--type", "skill", "untested", node=A)["id"],
                         node=A, check=False)
    assert refused.returncode == 1 and "executions" in refused.stderr

    listing = publish(devnet, A, SKILL)
    known_everywhere(devnet, listing["listing_id"])
    found = devnet.cli_json("market", "search", "my CI pipeline fails randomly", node=B)
    assert found and found[0]["listing_id"] == listing["listing_id"]

    before = {name: usdc(devnet, name) for name in (A, B, C)}
    bought = devnet.cli_json("skill", "buy", listing["listing_id"], "--max-price", "0.5", node=B)
    price = bought["price_micro_usdc"]
    assert price == listing["price_micro_usdc"] and isinstance(price, int) and price > 0
    assert bought["tx_hash"].startswith("0x") and bought["listing_id"] == listing["listing_id"]

    assert usdc(devnet, B) == before[B] - price
    assert usdc(devnet, A) == before[A] + price
    assert usdc(devnet, C) == before[C]

    crystal = devnet.api(B).get(f"/v1/crystals/{bought['crystal_id']}")
    seller_key = load_identity(load_config(devnet.data_dir(A))).public_key.hex()
    assert crystal["text"] == SKILL
    assert crystal["origin"] == "peer" and crystal["semanticType"] == "skill"
    assert crystal["governance"]["peerOrigin"] == seller_key
    assert crystal["provenanceDag"][0]["operation"] == "imported"
    assert crystal["provenanceDag"][0]["actor"] == f"peer:{seller_key}"

    purchases = devnet.api(B).get("/v1/purchases")["purchases"]
    assert [p["state"] for p in purchases] == ["completed"]
    sales = devnet.api(A).get("/v1/sales")["sales"]
    assert [(s["state"], s["tx_hash"]) for s in sales] == [("delivered", bought["tx_hash"])]
    assert devnet.api(C).get("/v1/purchases")["purchases"] == []
    stats = devnet.cli_json("market", "stats", node=A)
    assert stats["earned_micro_usdc"] == price and stats["top_skills"][0]["unique_buyers"] == 1


def test_price_above_cap_and_unknown_listing_are_refused(devnet: Devnet) -> None:
    listing = publish(devnet, A, SKILL + " (v2 notes)")
    known_everywhere(devnet, listing["listing_id"])
    before = usdc(devnet, B)
    too_cheap = devnet.cli("skill", "buy", listing["listing_id"], "--max-price", "0.000001",
                           node=B, check=False)
    assert too_cheap.returncode == 1 and "above --max-price" in too_cheap.stderr
    unknown = devnet.cli("skill", "buy", "ab" * 32, node=B, check=False)
    assert unknown.returncode == 1 and "unknown listing" in unknown.stderr
    assert "Traceback" not in too_cheap.stderr + unknown.stderr
    assert usdc(devnet, B) == before
    assert all(p["state"] == "completed" for p in devnet.api(B).get("/v1/purchases")["purchases"])


def test_seller_refuses_unlisted_private_and_replayed(devnet: Devnet) -> None:
    """A raw peer asks the seller directly: unlisted and private skills are refused,
    and an authorization presented twice settles once."""
    listing = publish(devnet, A, "Rotate TLS certificates before expiry with a 30-day alarm")
    known_everywhere(devnet, listing["listing_id"], (B,))
    private = devnet.cli_json("memory", "add", "--type", "skill", "my private deploy recipe", node=A)
    seller_key = load_identity(load_config(devnet.data_dir(A))).public_key
    seller_addr = devnet.api(A).get("/v1/status")["listen_addrs"][0]
    chain = devnet.cli_json("devnet", "status")["chain"]
    buyer_wallet = load_wallet(devnet.data_dir(B) / "wallet.key")
    before = {name: usdc(devnet, name) for name in (A, B)}

    pay_to = devnet.state.node(A).wallet_address  # type: ignore[union-attr]
    replies = trio.run(_raw_requests, seller_addr, listing, seller_key, private["id"],
                       buyer_wallet, chain, pay_to)
    unlisted, private_reply, first, second = replies
    assert isinstance(unlisted, ErrorReply) and unlisted.code == "unknown_listing"
    assert isinstance(private_reply, ErrorReply) and private_reply.code == "unknown_listing"
    assert first.kind == "delivery"  # the first presentation pays and delivers
    assert isinstance(second, ErrorReply) and second.code == "payment_invalid"
    assert "replayed" in second.message
    price = listing["price_micro_usdc"]
    assert usdc(devnet, B) == before[B] - price  # exactly one transfer
    assert usdc(devnet, A) == before[A] + price


def test_scope_tightened_after_listing_is_refused_at_sale(devnet: Devnet) -> None:
    """The seller re-checks a listed skill's scope when selling: a public skill made
    private after it was listed is refused, and no money moves."""
    listing = publish(devnet, A, "Drain a Kubernetes node safely: cordon, evict with PDBs, verify")
    known_everywhere(devnet, listing["listing_id"], (B,))
    # No route or command narrows a scope today, so the owner does it in its own database,
    # as a local tool would; the running seller reads the crystal per sale.
    db_path = load_config(devnet.data_dir(A)).db_path
    with closing(sqlite3.connect(db_path, timeout=60)) as conn, conn:
        changed = conn.execute(
            "UPDATE crystals SET access_scope = 'private', "
            "governance_json = json_set(governance_json, '$.accessScope', 'private') WHERE id = ?",
            (listing["crystal_id"],)).rowcount
    assert changed == 1
    assert devnet.api(A).get(f"/v1/crystals/{listing['crystal_id']}")["governance"][
        "accessScope"] == "private"
    before = {name: usdc(devnet, name) for name in (A, B)}
    refused = devnet.cli("skill", "buy", listing["listing_id"], node=B, check=False)
    assert refused.returncode == 1, refused.stdout
    assert "not available for sale" in refused.stderr and "Traceback" not in refused.stderr
    assert {name: usdc(devnet, name) for name in (A, B)} == before
    assert all(s["listing_id"] != listing["listing_id"]
               for s in devnet.api(A).get("/v1/sales")["sales"])


async def _raw_requests(addr: str, listing: dict[str, Any], seller_key: bytes, private_id: str,
                        wallet: Any, chain: dict[str, Any], pay_to: str) -> list[Any]:
    peer = make_net()
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        me = peer.identity

        async def ask(message: Any) -> Any:
            data = seal(me, message.KIND, message, peer.sequence.next(), _now_ms())
            envelope = open_envelope(await peer.request(addr, data, 30.0))
            return envelope.message() if envelope.kind == "error_reply" else envelope

        out = [
            await ask(PurchaseRequest(request_id=new_request_id(), listing_id="cd" * 32,
                                      buyer_address=wallet.address)),
            await ask(PurchaseRequest(request_id=new_request_id(),
                                      listing_id=listing_id_for(seller_key, private_id, 1),
                                      buyer_address=wallet.address)),
        ]
        auth = sign_authorization(wallet, chain_id=chain["chain_id"], token_address=chain["token_address"],
                                  to=pay_to, value_micro=listing["price_micro_usdc"], valid_for_s=240)
        payment = payment_message(new_request_id(), listing["listing_id"], auth)
        out.append(await ask(payment))
        out.append(await ask(PaymentAuthorization(
            request_id=new_request_id(), listing_id=payment.listing_id,
            authorization=payment.authorization, signature=payment.signature)))
        nursery.cancel_scope.cancel()
    return out


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def test_seller_offline_then_back(devnet: Devnet) -> None:
    listing = publish(devnet, A, "Bisect a performance regression with hyperfine and git bisect run")
    known_everywhere(devnet, listing["listing_id"], (B,))
    before = usdc(devnet, B)
    devnet.stop_node(A)
    try:
        failed = devnet.cli("skill", "buy", listing["listing_id"], node=B, check=False)
        assert failed.returncode == 1 and "unreachable" in failed.stderr
        assert usdc(devnet, B) == before  # no money moved
    finally:
        devnet.restart_node(A)
    bought = devnet.cli_json("skill", "buy", listing["listing_id"], node=B)
    assert usdc(devnet, B) == before - bought["price_micro_usdc"]


def test_crash_after_settlement_redelivers_after_restart(devnet: Devnet) -> None:
    listing = publish(devnet, A, "Recover a corrupted sqlite database with .recover and integrity_check")
    known_everywhere(devnet, listing["listing_id"], (B,))
    devnet.stop_node(A)
    devnet.restart_node(A, fault="crash_after_settle")
    before = {name: usdc(devnet, name) for name in (A, B)}
    failed = devnet.cli("skill", "buy", listing["listing_id"], node=B, check=False)
    assert failed.returncode == 1 and "redeliver" in failed.stderr
    price = listing["price_micro_usdc"]
    assert usdc(devnet, B) == before[B] - price  # paid once...
    assert usdc(devnet, A) == before[A] + price
    purchase = devnet.api(B).get("/v1/purchases")["purchases"][0]
    assert purchase["state"] == "paid_undelivered" and purchase["tx_hash"]

    devnet.restart_node(A)  # ...the seller comes back without the fault
    received = devnet.cli_json("skill", "redeliver", listing["listing_id"], node=B)
    assert received["tx_hash"] == purchase["tx_hash"]
    assert devnet.api(B).get(f"/v1/crystals/{received['crystal_id']}")["hash"] == \
        devnet.api(A).get(f"/v1/crystals/{listing['crystal_id']}")["hash"]
    assert usdc(devnet, B) == before[B] - price  # and nobody paid twice
    states = [s["state"] for s in devnet.api(A).get("/v1/sales")["sales"]
              if s["listing_id"] == listing["listing_id"]]
    assert states == ["delivered"]


def test_tampered_delivery_is_not_ingested(devnet: Devnet) -> None:
    listing = publish(devnet, A, "Shrink a docker image with multi-stage builds and distroless bases")
    known_everywhere(devnet, listing["listing_id"], (B,))
    devnet.stop_node(A)
    devnet.restart_node(A, fault="tamper_delivery")
    try:
        crystals_before = devnet.api(B).get("/v1/memory/status")["total"]
        failed = devnet.cli("skill", "buy", listing["listing_id"], node=B, check=False)
        assert failed.returncode == 1 and "does not match the listing's content hash" in failed.stderr
        assert devnet.api(B).get("/v1/memory/status")["total"] == crystals_before
        purchase = devnet.api(B).get("/v1/purchases")["purchases"][0]
        assert purchase["state"] == "tampered" and purchase["crystal_id"] is None
    finally:
        devnet.stop_node(A)
        devnet.restart_node(A)


def test_paid_request_id_does_not_unlock_another_listing_or_a_long_authorization(
        devnet: Devnet) -> None:
    """Issue 11 rows 2 and 10: a request id paid for L1 does not deliver L2 for a junk
    authorization, and an authorization valid far beyond the quote window is refused."""
    first = publish(devnet, A, "Tune Postgres autovacuum for a table with heavy update churn")
    second = publish(devnet, A, "Trace a slow gRPC call across services with OpenTelemetry spans")
    for listing in (first, second):
        known_everywhere(devnet, listing["listing_id"], (B,))
    seller_addr = devnet.api(A).get("/v1/status")["listen_addrs"][0]
    chain = devnet.cli_json("devnet", "status")["chain"]
    wallet = load_wallet(devnet.data_dir(B) / "wallet.key")
    pay_to = devnet.state.node(A).wallet_address  # type: ignore[union-attr]
    before = {name: usdc(devnet, name) for name in (A, B)}

    paid, reused, long_lived = trio.run(_reuse_request_id, seller_addr, first, second, wallet,
                                        chain, pay_to)
    assert paid.kind == "delivery"
    assert isinstance(reused, ErrorReply) and reused.code == "bad_request", reused
    assert isinstance(long_lived, ErrorReply) and "quote window" in long_lived.message
    assert usdc(devnet, B) == before[B] - first["price_micro_usdc"]  # only L1 was paid
    assert usdc(devnet, A) == before[A] + first["price_micro_usdc"]
    sold = {s["listing_id"] for s in devnet.api(A).get("/v1/sales")["sales"]
            if s["state"] == "delivered"}
    assert second["listing_id"] not in sold


async def _reuse_request_id(addr: str, first: dict[str, Any], second: dict[str, Any], wallet: Any,
                            chain: dict[str, Any], pay_to: str) -> list[Any]:
    peer = make_net()
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)

        async def ask(message: Any) -> Any:
            data = seal(peer.identity, message.KIND, message, peer.sequence.next(), _now_ms())
            envelope = open_envelope(await peer.request(addr, data, 30.0))
            return envelope.message() if envelope.kind == "error_reply" else envelope

        def authorize(value: int, valid_for_s: int = 240) -> Any:
            return sign_authorization(wallet, chain_id=chain["chain_id"],
                                      token_address=chain["token_address"], to=pay_to,
                                      value_micro=value, valid_for_s=valid_for_s)

        request_id = new_request_id()
        out = [await ask(payment_message(request_id, first["listing_id"],
                                         authorize(first["price_micro_usdc"])))]
        out.append(await ask(payment_message(request_id, second["listing_id"], authorize(0))))
        out.append(await ask(payment_message(new_request_id(), second["listing_id"],
                                             authorize(second["price_micro_usdc"], 3600))))
        nursery.cancel_scope.cancel()
    return out


def test_management_endorsement_reaches_every_node_and_the_bought_crystal(devnet: Devnet) -> None:
    """Issue 11 row 3: only a management node can endorse; the endorsement is gossiped,
    recorded everywhere, and a buyer stores the skill as verified by that key."""
    listing = publish(devnet, A, "Find a memory leak in a long-running Python service with tracemalloc")
    known_everywhere(devnet, listing["listing_id"], ("management", B, C))
    refused = devnet.cli("skill", "endorse", listing["listing_id"], node=B, check=False)
    assert refused.returncode == 1 and "management" in refused.stderr
    endorsed = devnet.cli_json("skill", "endorse", listing["listing_id"], node="management")
    management_key = load_identity(load_config(devnet.data_dir("management"))).public_key.hex()
    assert endorsed["endorsed_by"] == management_key

    def endorsed_on(name: str) -> bool:
        rows = devnet.api(name).get("/v1/listings")["listings"]
        return any(r["listing_id"] == listing["listing_id"] and r["endorsed_by"] == management_key
                   for r in rows)

    wait_until(lambda: all(endorsed_on(name) for name in (A, B, C)), 30, "endorsement everywhere")
    # C: B distrusts A by now (the tampered delivery above).
    bought = devnet.cli_json("skill", "buy", listing["listing_id"], node=C)
    crystal = devnet.api(C).get(f"/v1/crystals/{bought['crystal_id']}")
    assert crystal["isVerified"] is True and crystal["verifiedBy"] == management_key


def test_listings_do_not_give_the_skill_away_and_secrets_are_not_published(devnet: Devnet) -> None:
    """Issue 12 rows 6 and 7: peers see a name and a summary, never the paid text; a skill
    (or summary) the classifier flags is refused, naming the class."""
    secret_part = "then run the reconciler with --since 48h and compare checksums per partition"
    text = f"Repair a split-brain Kafka consumer group: stop all consumers, reset offsets, {secret_part}"
    listing = publish(devnet, A, text)
    known_everywhere(devnet, listing["listing_id"], (B,))
    seen = next(item for item in devnet.api(B).get("/v1/listings")["listings"]
                if item["listing_id"] == listing["listing_id"])
    shown = json.dumps(seen)
    assert secret_part not in shown and "reset offsets" not in shown
    assert "reset offsets" not in devnet.cli("market", "list", node=B).stdout

    leaky = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public",
                            "To reach staging: the db password is tango42, then run migrate", node=A)
    refused = devnet.cli("skill", "publish", leaky["id"], node=A, check=False)
    assert refused.returncode == 1 and "password" in refused.stderr
    crystal = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public",
                              "Compact a bloated sqlite database with VACUUM INTO a new file", node=A)
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.9", node=A)
    refused = devnet.cli("skill", "publish", crystal["id"], "--summary", "ask ana@example.com for help",
                         node=A, check=False)
    assert refused.returncode == 1 and "email" in refused.stderr
