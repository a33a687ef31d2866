"""Two real nodes in one trio run for the market's integration tests.

Each is a full ``NodeService`` (SQLite store, libp2p host on 127.0.0.1, hypercorn-trio API,
settlement engine) whose chain is an in-process eth-tester chain (``node.chain.embedded``)
shared by both. The seller's wallet holds ETH for settlement gas and no USDC; the buyer's
holds ``BUYER_USDC`` micro-USDC, so every balance below is an exact integer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
from eth_utils import to_wei

from node.chain.embedded import EmbeddedChain
from node.chain.localchain import fund
from node.config import load_config
from node.crystals import Crystal, content_hash
from node.crystals.model import now_ms
from node.init import init_node
from node.keys import load_identity
from node.market.book.listings import StoredListing
from node.market.purchase.skill_import import imported_skill
from node.service import NodeService
from protocol.envelope import Envelope, open_envelope, seal
from protocol.messages import Message
from protocol.purchase import Delivery
from protocol.topics import SKILLS
from tests.fixtures.messages import SELLER, T0_MS, sample_listing
from tests.support.wait import wait_until_async

BUYER_USDC = 10_000_000
WAIT_S = 120.0
# Generous: a purchase settles on chain inside it, on a 2-core machine shared with other jobs.
PURCHASE_TIMEOUT_S = 120.0


@dataclass
class Running:
    """A node started in its own cancel scope, so one node can stop while the others run."""

    node: NodeService
    scope: trio.CancelScope
    stopped: trio.Event


async def _run(node: NodeService, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    stopped = trio.Event()
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                task_status.started(Running(node, scope, stopped))
    finally:
        stopped.set()


@dataclass
class Market:
    chain: EmbeddedChain
    seller: NodeService
    buyer: NodeService
    nursery: trio.Nursery
    running: dict[str, Running]
    # A management node (``start_market(..., with_manager=True)``): its key is configured on all.
    manager: NodeService | None = None

    async def restart_seller(self) -> None:
        """Stop the seller's node (every task, its database closed) and start a new
        ``NodeService`` on the same data dir: same identity, wallet, listings and ledgers."""
        port = await self.stop("seller")
        self.seller = await self.start_again("seller", port, [self.buyer])

    async def stop(self, name: str) -> str:
        """Stop node ``name`` (every task, its listener closed, as a dead process's); its port."""
        old = self.running[name]
        # Back on its port, as a node with a fixed listen address in node.toml comes back.
        port = old.node.net.listen_addrs()[0].split("/")[4]
        old.scope.cancel()
        with trio.fail_after(WAIT_S):
            await old.stopped.wait()
            # A dead process's sockets are closed by the OS; py-libp2p's TCP listener lives in
            # a trio system task that outlives the cancelled node, so close it as the OS would.
            await old.node.net.host.get_network().close()
        return port

    async def start_again(self, name: str, port: str, connect: list[NodeService],
                          mesh: bool = True) -> NodeService:
        """A new ``NodeService`` on the data dir of stopped node ``name``, connected to (``mesh``:
        and in the skills mesh of) each of ``connect``."""
        config = self.running[name].node.config
        config = dataclasses.replace(
            config, net=dataclasses.replace(config.net, listen=f"/ip4/127.0.0.1/tcp/{port}"))
        node = NodeService(config, chain_client=self.chain.client())
        self.running[name] = await self.nursery.start(_run, node)
        for other in connect:  # the nodes that stayed up dial the one that comes back
            if mesh:
                await _connect(node, other)
                continue
            other.net.connect(node.net.listen_addrs()[0])
            await wait_until_async(
                lambda other=other: node.identity.peer_id in other.net.connected_peers(),  # type: ignore[misc]
                WAIT_S, f"{name} connected again")
        return node

    async def add_buyer(self, tmp_path: Path, name: str, vouchers: bool = False) -> NodeService:
        """Another funded buyer, connected to the seller (for bursts from several buyers)."""
        buyer = _node(tmp_path, name, self.chain, vouchers=vouchers)
        await trio.to_thread.run_sync(_fund, self.chain, buyer.wallet_address, BUYER_USDC)
        self.running[name] = await self.nursery.start(_run, buyer)
        await _connect(self.seller, buyer)
        return buyer

    async def usdc(self, node: NodeService) -> int:
        return await trio.to_thread.run_sync(self.chain.client().usdc_balance, node.wallet_address)

    async def balances(self) -> tuple[int, int]:
        """(seller, buyer) USDC in micro-USDC, read from the chain."""
        return await self.usdc(self.seller), await self.usdc(self.buyer)

    async def block(self) -> int:
        return int(await trio.to_thread.run_sync(lambda: self.chain.w3.eth.block_number))

    async def publish(self, text: str, category: str = "ops") -> dict[str, Any]:
        """Add a public skill on the seller, record the executions listing needs, publish it."""
        crystal = await self.seller.memory.add_from_request({"text": text, "type": "skill", "scope": "public",
                                                 "category": category, "tags": [category]})
        for _ in range(self.seller.config.market.min_executions):
            await self.seller.market.record_execution(crystal.id, True, 0.9)
        return await self.seller.market.publish_skill(crystal.id)

    async def known_to_buyer(self, *listings: dict[str, Any]) -> None:
        async def known() -> bool:
            for listing in listings:
                if await self.buyer.memory.run(self.buyer.listings.get, listing["listing_id"]) is None:
                    return False
            return True

        await wait_until_async(known, WAIT_S, "the listings to reach the buyer's listing book over gossip")

    async def rows(self, listing_id: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """(buyer's purchase rows, seller's sale rows) of ``listing_id``: (state, tx, price)."""
        purchases = [(p["state"], p["tx_hash"], p["price_micro_usdc"])
                     for p in await self.buyer.market.purchases(100) if p["listing_id"] == listing_id]
        sales = [(s["state"], s["tx_hash"], s["price_micro_usdc"])
                 for s in await self.seller.market.sales(100) if s["listing_id"] == listing_id]
        return purchases, sales

    async def ask_seller(self, message: Message) -> Envelope:
        """Send one purchase-protocol message from the buyer's identity over its libp2p host."""
        net = self.buyer.net
        data = seal(self.buyer.identity, message.KIND, message, net.sequence.next(),
                    now_ms())
        return open_envelope(await net.request(self.seller.identity.peer_id, data, WAIT_S))

    def http(self, node: NodeService) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=WAIT_S * 2,
                                 headers={"authorization": f"Bearer {node.api_token}"})


def _node(tmp_path: Path, name: str, chain: EmbeddedChain,
          management_keys: tuple[str, ...] = (), vouchers: bool = False) -> NodeService:
    init_node(tmp_path / name, name=name, embedder="hashing")
    # ``exact`` unless a test asks for vouchers (tests/integration/market/test_market_vouchers.py).
    overrides: dict[str, Any] = {"market": {"purchase_timeout_s": PURCHASE_TIMEOUT_S,
                                            "vouchers": vouchers}}
    if management_keys:
        overrides["net"] = {"management_keys": list(management_keys)}
    config = load_config(tmp_path / name, environ={}, overrides=overrides)
    return NodeService(config, chain_client=chain.client())


def _fund(chain: EmbeddedChain, address: str, usdc_micro: int) -> None:
    fund(chain.w3, [address], usdc_micro=usdc_micro, eth_wei=to_wei(1, "ether"),
         deployer_key=chain.deployer.key.to_0x_hex(), token_address=chain.token_address)


async def _connect(seller: NodeService, buyer: NodeService) -> None:
    buyer.net.connect(seller.net.listen_addrs()[0])

    async def meshed() -> bool:
        return (seller.identity.peer_id in buyer.net.mesh_peers(SKILLS)
                and buyer.identity.peer_id in seller.net.mesh_peers(SKILLS))

    await wait_until_async(meshed, WAIT_S, "seller and buyer in each other's skills mesh")


async def start_market(tmp_path: Path, chain: EmbeddedChain, nursery: trio.Nursery,
                       with_manager: bool = False, vouchers: bool = False) -> Market:
    keys: tuple[str, ...] = ()
    if with_manager:  # its identity first, so every node starts with its key configured
        init_node(tmp_path / "manager", name="manager", embedder="hashing")
        keys = (load_identity(load_config(tmp_path / "manager", environ={})).public_key.hex(),)
    seller = _node(tmp_path, "seller", chain, keys, vouchers)
    buyer = _node(tmp_path, "buyer", chain, keys, vouchers)

    def fund_wallets() -> None:
        _fund(chain, seller.wallet_address, 0)
        _fund(chain, buyer.wallet_address, BUYER_USDC)

    await trio.to_thread.run_sync(fund_wallets)
    running = {"seller": await nursery.start(_run, seller), "buyer": await nursery.start(_run, buyer)}
    await _connect(seller, buyer)
    market = Market(chain, seller, buyer, nursery, running)
    if with_manager:
        market.manager = _node(tmp_path, "manager", chain, keys)
        running["manager"] = await nursery.start(_run, market.manager)
        await _connect(seller, market.manager)
        await _connect(buyer, market.manager)
    assert await market.balances() == (0, BUYER_USDC)
    return market


async def start_node(tmp_path: Path, name: str, chain: EmbeddedChain, nursery: trio.Nursery,
                     overrides: dict[str, Any]) -> NodeService:
    """One more node with config ``overrides`` (e.g. listing shards), started, not connected."""
    init_node(tmp_path / name, name=name, embedder="hashing")
    config = load_config(tmp_path / name, environ={}, overrides=overrides)
    node = NodeService(config, chain_client=chain.client())
    await nursery.start(_run, node)
    return node


def bought(text: str) -> Crystal:
    """A bought skill of ``text`` from the fixtures' seller (not yet stored)."""
    stored = StoredListing(listing=sample_listing(), seller_key=SELLER.public_key, issued_at_ms=T0_MS,
                           received_at_ms=T0_MS, superseded_by=None, own_crystal_id=None, envelope=b"")
    delivery = Delivery("0f" * 16, stored.listing.listing_id, text, content_hash(text), "0x" + "ab" * 32)
    return imported_skill(stored, delivery, management_keys=())
