"""The buyer's way out without the seller (``wallet withdraw``, issue 36 delivery 4/5): the
contract's timed withdrawal on the eth-tester chain (time advanced, no sleeps), and the
seller claiming what it is owed before the withdrawal could take it.

The seller's claim bounds are set out of reach, so only the pending withdrawal can make its
claim round claim: a claimer that ignored withdrawals would leave the buyer to take back
money it had already spent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import trio

from node.chain import Channels
from node.chain.embedded import EmbeddedChain, start_embedded_chain
from node.market.purchase import PurchaseRefused
from tests.support.market import BUYER_USDC, Market, start_market

SKILL = "Roll back a bad Helm release: helm history, helm rollback to the last good revision"
OUT_OF_REACH = 10**12


@pytest.fixture
def chain() -> EmbeddedChain:
    """A chain of its own: a test here moves the chain's clock a day ahead, which would
    expire the (wall-clock dated) deposit authorizations of the module's later tests."""
    return start_embedded_chain(n_accounts=1)


@pytest.fixture
async def market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery) -> Market:
    found = await start_market(tmp_path, chain, nursery, vouchers=True)
    claimer = found.seller.claimer
    claimer.market = dataclasses.replace(
        claimer.market, claim_bound_trusted_micro_usdc=OUT_OF_REACH,
        claim_bound_provisional_micro_usdc=OUT_OF_REACH,
        claim_bound_untrusted_micro_usdc=OUT_OF_REACH, claim_max_age_s=10**9)
    return found


async def on_chain(market: Market, channel_id: str) -> tuple[int, int]:
    channels = Channels(market.chain.client(), market.chain.deployer)
    state = await trio.to_thread.run_sync(channels.state, channel_id)
    return state.balance_micro, state.total_claimed_micro


async def test_a_withdrawal_returns_only_what_the_seller_did_not_claim_after_the_delay(
        market: Market) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    price = listing["price_micro_usdc"]
    deposit = market.buyer.config.market.channel_deposit_micro_usdc
    bought = await market.buyer.market.buy(listing["listing_id"])
    channel_id = bought["channel_id"]
    await market.seller.claimer.round()  # nothing due: the bounds are out of reach
    assert await on_chain(market, channel_id) == (deposit, 0)

    started = await market.buyer.market.withdraw(channel_id)
    assert started["step"] == "initiated" and started["withdraw_micro_usdc"] == deposit
    [paying] = (await market.buyer.market.channels())["paying"]
    assert paying["state"] == "withdrawing" and paying["withdraw_micro_usdc"] == deposit
    assert paying["withdraw_finalize_after_s"] == (
        started["withdraw_requested_at_s"] + paying["withdraw_delay_s"])

    # Too early: the contract refuses, the ledger and the chain are unchanged.
    with pytest.raises(PurchaseRefused) as early:
        await market.buyer.market.withdraw(channel_id)
    assert early.value.code == "withdraw_pending"
    assert await on_chain(market, channel_id) == (deposit, 0)

    # The seller's next claim round sees the withdrawal and claims what the voucher owes it.
    await market.seller.claimer.round()
    assert await on_chain(market, channel_id) == (deposit, price)
    [sold] = (await market.seller.market.channels())["paid_by"]
    assert sold["withdraw_requested_at_s"] and sold["unclaimed_micro_usdc"] == 0

    market.chain.advance_time(paying["withdraw_delay_s"] + 1)
    done = await market.buyer.market.withdraw(channel_id)
    assert (done["step"], done["withdrawn_micro_usdc"], done["spent_micro_usdc"]) == (
        "finalized", deposit - price, price)
    assert await market.balances() == (price, BUYER_USDC - price)
    [closed] = (await market.buyer.market.channels())["paying"]
    assert (closed["state"], closed["withdraw_finalize_after_s"]) == ("closed", None)
    assert (closed["spent_micro_usdc"], closed["refunded_micro_usdc"]) == (price, deposit - price)


async def test_the_api_withdraws_and_refuses_what_is_not_a_channel(market: Market) -> None:
    listing = await market.publish(SKILL)
    await market.known_to_buyer(listing)
    bought = await market.buyer.market.buy(listing["listing_id"])
    async with market.http(market.buyer) as api:
        started = await api.post("/v1/wallet/withdraw", json={"channel_id": bought["channel_id"]})
        assert started.status_code == 200 and started.json()["step"] == "initiated"
        again = await api.post("/v1/wallet/withdraw", json={"channel_id": bought["channel_id"]})
        assert again.status_code == 409 and again.json()["code"] == "withdraw_pending"
        # While the channel is being withdrawn the seller is paid with exact.
        exact = await api.post("/v1/purchases", json={"listing_id": listing["listing_id"],
                                                      "again": True})
        assert exact.status_code == 200 and exact.json()["scheme"] == "exact", exact.text
        malformed = await api.post("/v1/wallet/withdraw", json={"channel_id": "0x12"})
        assert malformed.status_code == 400
        unknown = await api.post("/v1/wallet/withdraw", json={"channel_id": "0x" + "ab" * 32})
        assert unknown.status_code == 409 and unknown.json()["code"] == "unknown_channel"
