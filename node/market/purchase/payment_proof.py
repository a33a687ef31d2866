"""What the chain says about the buyer's payment: did an authorization settle, and does
a delivery's transaction really move the listed price from us to the seller.

Every read runs in a worker thread bounded by ``CHAIN_CALL_TIMEOUT_S``, so a stalled
RPC never holds a purchase past its own timeout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from node.chain import ChainClient, ChainError

R = TypeVar("R")
CHAIN_CALL_TIMEOUT_S = 10.0


async def chain_call(function: Callable[..., R], *args: Any) -> R:
    """A blocking chain read in a worker thread that cannot hold us past its timeout: a
    stalled RPC abandons the thread (its late answer is dropped) and raises ChainError."""
    with trio.move_on_after(CHAIN_CALL_TIMEOUT_S):
        return await trio.to_thread.run_sync(functools.partial(function, *args),
                                             abandon_on_cancel=True)  # type: ignore[call-arg]
    raise ChainError(f"the chain did not answer within {CHAIN_CALL_TIMEOUT_S:.0f} s")


async def settled_tx(client: ChainClient | None, payer: str, nonce: bytes) -> str | None:
    """The transaction that used ``payer``'s authorization ``nonce``, or None when it has not
    settled (or the chain cannot tell us now)."""
    if client is None:
        return None
    try:
        used = await chain_call(client.authorization_state, payer, nonce)
        if not used:
            return None
        events = await chain_call(client.authorization_events, payer, nonce)
    except ChainError:
        return None
    for event in events:
        tx = event.get("transactionHash")
        if tx is not None:
            return "0x" + bytes(tx).hex()
    return None


async def transfer_problem(client: ChainClient | None, tx_hash: str, payer: str, pay_to: str,
                           price: int) -> str | None:
    """None if the chain shows Transfer(payer → pay_to, price) in tx_hash, else why not."""
    if client is None:
        return "no chain configured to verify the payment"
    try:
        receipt = await chain_call(client.receipt, tx_hash)
    except ChainError as error:
        return f"chain unreachable: {error}"
    if receipt is None or receipt["status"] != 1:
        return f"transaction {tx_hash} is not a successful transaction on chain"
    transfers = client.transfer_events(receipt)
    wanted = (payer.lower(), pay_to.lower(), price)
    if not any((a.lower(), b.lower(), v) == wanted for a, b, v in transfers):
        return f"transaction {tx_hash} does not transfer {price} micro-USDC from us to {pay_to}"
    return None
