"""Settlement engine against an in-process chain (eth-tester, chain id 84532, the devnet layout)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.authorization import Authorization, sign_authorization
from node.chain.client import ChainClient, encode_transfer_with_authorization
from node.chain.embedded import EmbeddedChain, start_embedded_chain
from node.chain.errors import ChainUnavailable, PaymentRejected
from node.chain.ledger import CONFIRMED, FAILED, SettlementLedger
from node.chain.localchain import free_port
from node.chain.settlement import SettlementEngine

PRICE = 10_000


@pytest.fixture(scope="module")
def chain() -> Iterator[EmbeddedChain]:
    yield start_embedded_chain(n_accounts=6, usdc_micro=10_000_000)


@pytest.fixture
def seller() -> LocalAccount:
    return Account.create()


@pytest.fixture
def engine(chain: EmbeddedChain, seller: LocalAccount, tmp_path: Path) -> SettlementEngine:
    # The seller pays gas: give it ETH from a funded account.
    funder = chain.deployer
    client = chain.client()
    client.wait_receipt(client.send(funder, seller.address, b"", 21_000, value_wei=10**18))
    return SettlementEngine(client, SettlementLedger(tmp_path / "settlements.db"), seller,
                            batch_max_size=10, batch_max_delay_ms=50)


def pay(chain: EmbeddedChain, buyer: LocalAccount, to: str, value: int = PRICE, **kwargs: object) -> Authorization:
    return sign_authorization(buyer, chain_id=chain.chain_id, token_address=chain.token_address,
                              to=to, value_micro=value, **kwargs)  # type: ignore[arg-type]


def usdc(chain: EmbeddedChain, address: str) -> int:
    return chain.client().usdc_balance(address)


def tx_count(chain: EmbeddedChain, address: str) -> int:
    return int(chain.w3.eth.get_transaction_count(address))


def test_accept_payment_settles_and_confirms(chain: EmbeddedChain, engine: SettlementEngine,
                                             seller: LocalAccount) -> None:
    buyer = chain.accounts[0]
    before = usdc(chain, buyer.address)
    row = engine.accept_payment(pay(chain, buyer, seller.address), price_micro=PRICE)
    assert row.state == CONFIRMED and row.tx_hash and row.block_number
    assert usdc(chain, seller.address) == PRICE
    assert usdc(chain, buyer.address) == before - PRICE
    assert engine.ledger.confirmed_total_micro(seller.address) == PRICE


def test_replayed_authorization_is_rejected_and_not_paid_twice(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount, tmp_path: Path) -> None:
    authorization = pay(chain, chain.accounts[0], seller.address)
    engine.accept_payment(authorization, price_micro=PRICE)
    sent = tx_count(chain, seller.address)
    with pytest.raises(PaymentRejected) as caught:
        engine.accept_payment(authorization, price_micro=PRICE)
    assert caught.value.reason == "replayed"
    # A node that lost its ledger still refuses it: the nonce is used on chain.
    amnesiac = SettlementEngine(engine.client, SettlementLedger(tmp_path / "other.db"), seller)
    with pytest.raises(PaymentRejected) as caught:
        amnesiac.accept_payment(authorization, price_micro=PRICE)
    assert caught.value.reason == "replayed"
    # settle() is idempotent: same row, no new transaction.
    assert engine.settle(authorization).state == CONFIRMED
    assert tx_count(chain, seller.address) == sent
    assert usdc(chain, seller.address) == PRICE
    assert amnesiac.ledger.count() == 0


@pytest.mark.parametrize(
    ("authorization_kwargs", "accept_kwargs", "reason"),
    [
        ({"valid_before_s": 1}, {}, "expired"),
        ({"valid_after_s": 4_000_000_000}, {}, "not_yet_valid"),
        ({}, {"pay_to": "0x" + "12" * 20}, "wrong_payee"),
        ({}, {"price_micro": PRICE * 2}, "wrong_amount"),
    ],
)
def test_bad_terms_are_rejected_and_nothing_recorded(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount,
        authorization_kwargs: dict[str, object], accept_kwargs: dict[str, object], reason: str) -> None:
    authorization = pay(chain, chain.accounts[1], seller.address, **authorization_kwargs)
    kwargs: dict[str, object] = {"price_micro": PRICE, **accept_kwargs}
    with pytest.raises(PaymentRejected) as caught:
        engine.accept_payment(authorization, **kwargs)  # type: ignore[arg-type]
    assert caught.value.reason == reason
    assert engine.ledger.count() == 0 and usdc(chain, seller.address) == 0


def test_insufficient_balance_is_rejected(chain: EmbeddedChain, engine: SettlementEngine,
                                          seller: LocalAccount) -> None:
    with pytest.raises(PaymentRejected) as caught:
        engine.accept_payment(pay(chain, Account.create(), seller.address), price_micro=PRICE)
    assert caught.value.reason == "insufficient_balance"
    assert engine.ledger.count() == 0


def test_tampered_signature_is_rejected_off_chain_and_on_chain(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount) -> None:
    authorization = pay(chain, chain.accounts[1], seller.address)
    signature = bytearray(authorization.signature)
    signature[5] ^= 0xFF
    tampered = Authorization(**{**authorization.__dict__, "signature": bytes(signature)})
    with pytest.raises(PaymentRejected) as caught:
        engine.accept_payment(tampered, price_micro=PRICE)
    assert caught.value.reason == "bad_signature"
    # Bypassing the off-chain check, the token refuses it too.
    row = engine.settle(tampered)
    assert row.state == FAILED and row.reason == "bad_signature"
    assert usdc(chain, seller.address) == 0


def test_expiry_enforced_on_chain(chain: EmbeddedChain, engine: SettlementEngine,
                                  seller: LocalAccount) -> None:
    block_time = int(chain.w3.eth.get_block("latest")["timestamp"])
    authorization = pay(chain, chain.accounts[2], seller.address, valid_before_s=block_time + 30)
    chain.advance_time(120)
    row = engine.settle(authorization)
    assert row.state == FAILED and row.reason == "expired"


def test_batch_settles_good_items_and_reports_bad_ones(chain: EmbeddedChain, engine: SettlementEngine,
                                                       seller: LocalAccount) -> None:
    good = [pay(chain, chain.accounts[i % 3], seller.address) for i in range(7)]
    broke = pay(chain, Account.create(), seller.address)  # no money
    used = pay(chain, chain.accounts[0], seller.address)
    engine.settle(used)
    fallbacks: list[object] = []
    engine._resolve_used = fallbacks.append  # type: ignore[method-assign]
    rows = engine.settle_many([*good[:3], broke, *good[3:]])
    assert fallbacks == []  # outcomes come from the receipt, not from searching the chain
    assert [row.state for row in rows] == [CONFIRMED] * 3 + [FAILED] + [CONFIRMED] * 4
    assert rows[3].reason == "insufficient_balance"
    assert len({row.tx_hash for row in rows if row.state == CONFIRMED}) == 1
    assert usdc(chain, seller.address) == PRICE * 8


def test_chain_unreachable_raises_and_records_nothing_settled(
        chain: EmbeddedChain, seller: LocalAccount, tmp_path: Path) -> None:
    dead = ChainClient.connect(f"http://127.0.0.1:{free_port()}", chain.token_address,
                               chain.settler_address, timeout_s=1)
    offline = SettlementEngine(dead, SettlementLedger(tmp_path / "offline.db"), seller)
    authorization = pay(chain, chain.accounts[0], seller.address)
    with pytest.raises(ChainUnavailable, match="cannot reach"):
        offline.accept_payment(authorization, price_micro=PRICE)
    assert offline.ledger.count() == 0
    with pytest.raises(ChainUnavailable):
        offline.settle(authorization)
    assert offline.ledger.count(CONFIRMED) == 0


def test_wrong_chain_id_is_refused(chain: EmbeddedChain) -> None:
    client = ChainClient(chain.w3, chain.token_address, expected_chain_id=8453)
    with pytest.raises(ChainUnavailable, match="configured for 8453"):
        _ = client.chain_id


def _crash_after(engine: SettlementEngine, authorization: Authorization, *, broadcast: bool) -> str:
    """Leave the ledger as a crash would: claimed, tx hash recorded, maybe broadcast, never confirmed."""
    engine.ledger.claim([authorization])
    tx_hash, raw = engine.client.sign_transaction(
        engine.sender, engine.client.token_address, encode_transfer_with_authorization(authorization), 120_000)
    engine.ledger.mark_submitted([authorization.key], tx_hash)
    if broadcast:
        engine.client.broadcast(raw, engine.sender.address)
    return tx_hash


def test_crash_after_broadcast_reconciles_without_second_settlement(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount, tmp_path: Path) -> None:
    authorization = pay(chain, chain.accounts[3], seller.address)
    tx_hash = _crash_after(engine, authorization, broadcast=True)
    sent = tx_count(chain, seller.address)
    restarted = SettlementEngine(chain.client(), SettlementLedger(tmp_path / "settlements.db"), seller)
    [row] = restarted.reconcile()
    assert row.state == CONFIRMED and row.tx_hash == tx_hash
    assert tx_count(chain, seller.address) == sent  # nothing resubmitted
    assert usdc(chain, seller.address) == PRICE
    assert restarted.reconcile() == []


def test_crash_before_broadcast_and_before_submit_are_retried(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount, tmp_path: Path) -> None:
    unsent = pay(chain, chain.accounts[3], seller.address)
    lost_hash = _crash_after(engine, unsent, broadcast=False)
    pending = pay(chain, chain.accounts[4], seller.address)
    engine.ledger.claim([pending])
    restarted = SettlementEngine(chain.client(), SettlementLedger(tmp_path / "settlements.db"), seller)
    rows = restarted.reconcile()
    assert [row.state for row in rows] == [CONFIRMED, CONFIRMED]
    assert rows[0].tx_hash != lost_hash
    assert usdc(chain, seller.address) == 2 * PRICE


def test_reconcile_finds_settlement_made_by_someone_else(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount) -> None:
    authorization = pay(chain, chain.accounts[4], seller.address)
    engine.ledger.claim([authorization])
    # A third party (e.g. an x402 facilitator) submits the buyer's authorization first.
    other = chain.client()
    third_party_tx = other.send(chain.accounts[5], chain.token_address,
                                encode_transfer_with_authorization(authorization), 120_000)
    other.wait_receipt(third_party_tx)
    [row] = engine.reconcile()
    assert row.state == CONFIRMED and row.tx_hash == third_party_tx
    assert usdc(chain, seller.address) == PRICE


async def test_trio_batcher_settles_concurrent_purchases_in_few_transactions(
        chain: EmbeddedChain, engine: SettlementEngine, seller: LocalAccount) -> None:
    authorizations = [pay(chain, chain.accounts[i % 5], seller.address) for i in range(12)]
    results: list[object] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)

        async def buy(authorization: Authorization) -> None:
            results.append(await engine.accept_payment_async(authorization, price_micro=PRICE))

        async with trio.open_nursery() as buyers:
            for authorization in authorizations:
                buyers.start_soon(buy, authorization)
        with pytest.raises(PaymentRejected):
            await engine.accept_payment_async(authorizations[0], price_micro=PRICE)
        nursery.cancel_scope.cancel()
    assert all(row.state == CONFIRMED for row in results)  # type: ignore[attr-defined]
    assert len({row.tx_hash for row in results}) <= 4  # type: ignore[attr-defined]
    assert usdc(chain, seller.address) == 12 * PRICE


async def test_async_without_batcher_settles_alone(chain: EmbeddedChain, engine: SettlementEngine,
                                                   seller: LocalAccount) -> None:
    row = await engine.accept_payment_async(pay(chain, chain.accounts[0], seller.address), price_micro=PRICE)
    assert row.state == CONFIRMED
