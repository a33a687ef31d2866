"""Helpers for tests and benchmarks of the net layer (real hosts, one trio run).

Kept in ``tests/support`` (not shipped in the product package) so integration
tests, e2e tests and the gossip benchmarks build nodes and listings the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import multiaddr
import trio
from libp2p.peer.id import ID

from node.config import NetConfig
from node.net.gossip import TOPICS
from node.net.gossip_config import GossipConfig
from node.net.listing_sync import SyncLimits
from node.net.rules.scoring import ScoringConfig
from node.net.service import NetService
from protocol.envelope import Envelope, seal
from protocol.identity import Identity
from protocol.messages import (
    ErrorReply,
    PurchaseRequest,
    SkillListing,
    WeatherAlert,
    listing_id_for,
    new_request_id,
)
from tests.support.wait import wait_until_async


@dataclass
class Inbox:
    """Envelopes received per topic by one node (registered as its handlers)."""

    listings: list[Envelope] = field(default_factory=list)
    weather: list[Envelope] = field(default_factory=list)
    trust: list[Envelope] = field(default_factory=list)

    def attach(self, net: NetService) -> None:
        async def on_listing(envelope: Envelope) -> None:
            self.listings.append(envelope)

        async def on_weather(envelope: Envelope) -> None:
            self.weather.append(envelope)

        async def on_trust(envelope: Envelope) -> None:
            self.trust.append(envelope)

        net.on_listing(on_listing)
        net.on_weather(on_weather)
        net.on_trust_report(on_trust)

    def total(self) -> int:
        return len(self.listings) + len(self.weather) + len(self.trust)


def make_listing(
    seller: Identity,
    name: str = "summarise-logs",
    now_ms: int = 0,
    skill_version: int = 1,
    price_micro_usdc: int = 10_000,
) -> SkillListing:
    """A valid listing for ``seller`` (ids derived as protocol.messages requires)."""
    stable_skill_id = f"skill-{name}"
    return SkillListing(
        listing_id=listing_id_for(seller.public_key, stable_skill_id, skill_version),
        stable_skill_id=stable_skill_id,
        skill_version=skill_version,
        name=name,
        description="test listing",
        tags=("test",),
        category="tools",
        content_hash="ab" * 32,
        size_bytes=100,
        price_micro_usdc=price_micro_usdc,
        pay_to="0x" + "11" * 20,
        chain_id=84532,
        token_address="0x" + "22" * 20,
        executions=5,
        successes=4,
        reward_sum_ppm=3_000_000,
        unique_buyers=1,
        expires_at_ms=(now_ms or 1) + 86_400_000,
    )


def make_weather(
    issued_at_ms: int, duration_ms: int = 600_000, level_ppm: int = 800_000
) -> WeatherAlert:
    return WeatherAlert(
        cortisol_level_ppm=level_ppm,
        issued_at_ms=issued_at_ms,
        expires_at_ms=issued_at_ms + duration_ms,
        reason="test spike",
    )


def make_net(
    identity: Identity | None = None,
    bootstrap: Sequence[str] = (),
    management_keys: Sequence[bytes] = (),
    scoring: ScoringConfig | None = None,
    sync_limits: SyncLimits | None = None,
    interests: Sequence[str] = ("*",),
    **net_overrides: Any,
) -> NetService:
    config = NetConfig(
        listen="/ip4/127.0.0.1/tcp/0",
        bootstrap=list(bootstrap),
        management_keys=[key.hex() for key in management_keys],
        **({"heartbeat_s": 0.5, "reconnect_max_backoff_s": 2.0} | net_overrides),
    )
    return NetService(
        config,
        identity or Identity.generate(),
        gossip_config=GossipConfig(heartbeat_s=0.5),
        scoring_config=scoring,
        sync_limits=sync_limits,
        interests=interests,
    )


async def start_mesh(
    nursery: trio.Nursery,
    count: int,
    management_keys: Sequence[bytes] = (),
    identities: Sequence[Identity] = (),
    scoring: ScoringConfig | None = None,
    timeout_s: float = 15.0,
) -> list[NetService]:
    """Start ``count`` nodes, each bootstrapping from all earlier ones; wait for the mesh."""
    nets: list[NetService] = []
    for index in range(count):
        identity = identities[index] if index < len(identities) else None
        bootstrap = [net.listen_addrs()[0] for net in nets]
        net = make_net(
            identity, bootstrap=bootstrap, management_keys=management_keys, scoring=scoring
        )
        await nursery.start(net.run)
        nets.append(net)
    want = min(count - 1, 4)
    await wait_until_async(
        lambda: all(len(net.mesh_peers(topic)) >= want for net in nets for topic in TOPICS),
        timeout_s,
        "every node to have mesh peers on every topic",
    )
    return nets


# --- reachability helpers (a "private" node: nobody can dial it) ------------------------------
def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def go_private(net: NetService) -> list[multiaddr.Multiaddr]:
    """Close the node's listeners: it can still dial out, nobody can dial it."""
    was = [addr for addr in net.host.get_addrs() if "/p2p-circuit" not in str(addr)]
    for listener in list(net.host.get_network().listeners.values()):
        await listener.close()
    net.host.get_network().listeners.clear()
    return was


def kind(net: NetService, peer: NetService) -> str | None:
    assert net.reachability is not None
    return net.reachability.kind(ID.from_base58(peer.peer_id))


async def serve_echo(net: NetService) -> None:
    async def handle(peer_id: str, envelope: Envelope) -> bytes:
        request = envelope.message()
        assert isinstance(request, PurchaseRequest)
        reply = ErrorReply(request_id=request.request_id, code="bad_request", message=f"echo {peer_id}")
        return seal(net.identity, ErrorReply.KIND, reply, net.sequence.next(), now_ms())

    net.serve_purchases(handle)


def purchase_request(buyer: NetService) -> bytes:
    request = PurchaseRequest(request_id=new_request_id(), listing_id="ab" * 32,
                              buyer_address="0x" + "33" * 20)
    return seal(buyer.identity, PurchaseRequest.KIND, request, buyer.sequence.next(), now_ms())
