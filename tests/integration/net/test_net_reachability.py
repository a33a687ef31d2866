"""Reachability over real py-libp2p hosts: AutoNAT, circuit relay v2, DCUtR, relay limits.

A "private" node here is one nobody can dial: its listeners are closed once it
has connected out (as a node behind NAT: it reaches others, nobody reaches it).
"""

from __future__ import annotations

import trio
from libp2p.peer.id import ID
from libp2p.relay.circuit_v2.pb.circuit_pb2 import HopMessage
from libp2p.relay.circuit_v2.pb.circuit_pb2 import PeerId as CircuitPeerId
from libp2p.relay.circuit_v2.protocol_buffer import StatusCode
from libp2p.relay.circuit_v2.utils import read_delimited_msg, write_delimited_msg

from node.net.reach.relay import HOP_PROTOCOL_ID
from node.net.service import NetService
from protocol.envelope import open_envelope
from protocol.messages import ErrorReply
from tests.support.net import go_private, kind, make_net, purchase_request, serve_echo
from tests.support.wait import wait_until_async


async def start(nursery: trio.Nursery, net: NetService) -> NetService:
    await nursery.start(net.run)
    return net


async def test_private_seller_is_reached_through_its_relay(nursery: trio.Nursery) -> None:
    """A private node reserves on the relays, advertises circuit addresses, and a peer that
    never met it finds it (DHT), connects through a relay and runs a request/response."""
    relays = [await start(nursery, make_net(relay_service="on", hole_punching=False))]
    relays.append(await start(nursery, make_net(
        bootstrap=[relays[0].listen_addrs()[0]], relay_service="on", hole_punching=False)))
    seller = make_net(bootstrap=[relay.listen_addrs()[0] for relay in relays], hole_punching=False)
    await start(nursery, seller)
    await serve_echo(seller)
    await wait_until_async(lambda: len(seller.connected_peers()) == 2, 20, "seller connected to relays")
    dead = await go_private(seller)
    status = seller.reachability_status
    await wait_until_async(lambda: status()["status"] == "private", 20, "seller private")
    await wait_until_async(lambda: len(status()["reservations"]) == 2, 30, "two reservations")
    assert sorted(status()["reservations"]) == sorted(relay.peer_id for relay in relays)
    circuits = [addr for addr in seller.listen_addrs() if "/p2p-circuit" in addr]
    assert len(circuits) >= 2 and all(addr.endswith(f"/p2p/{seller.peer_id}") for addr in circuits)
    # Identify push: the relays know the seller's circuit addresses.
    await wait_until_async(lambda: any("/p2p-circuit" in str(addr) for addr in relays[0].host
                                 .get_peerstore().addrs(ID.from_base58(seller.peer_id))),
                     20, "relay learns the circuit address")

    buyer = await start(nursery, make_net(bootstrap=[relays[0].listen_addrs()[0]],
                                          hole_punching=False))
    await wait_until_async(lambda: relays[0].peer_id in buyer.connected_peers(), 20, "buyer up")
    # What the buyer knows of the seller predates its relays (a DHT walk found its old
    # address): the dial looks the seller up again and goes through a relay.
    buyer.host.get_peerstore().add_addrs(ID.from_base58(seller.peer_id), dead, 3600)
    raw = await buyer.request(seller.peer_id, purchase_request(buyer), timeout_s=30)
    reply = open_envelope(raw).message()
    assert isinstance(reply, ErrorReply) and reply.message == f"echo {buyer.peer_id}"
    assert kind(buyer, seller) == "relayed"
    relayed = sum(relay.reachability_status()["relay"]["relayed_bytes"] for relay in relays)
    assert relayed > 0


async def test_autonat_public_and_private(nursery: trio.Nursery) -> None:
    """Dial-back on a fresh connection: reachable nodes are public; a node whose advertised
    address cannot be dialled is private, although it is connected to every server."""
    first = await start(nursery, make_net(hole_punching=False))
    nets = [first] + [await start(nursery, make_net(bootstrap=[first.listen_addrs()[0]],
                                                    hole_punching=False)) for _ in range(2)]
    hidden = await start(nursery, make_net(bootstrap=[net.listen_addrs()[0] for net in nets],
                                           hole_punching=False))
    await wait_until_async(lambda: len(hidden.connected_peers()) == 3, 20, "hidden node connected")
    dead = await go_private(hidden)
    assert hidden.reachability is not None
    hidden.reachability.autonat.addrs = lambda: dead  # it still advertises its old address
    await wait_until_async(lambda: all(net.reachability_status()["status"] == "public" for net in nets),
                     30, "reachable nodes public")
    await wait_until_async(lambda: hidden.reachability_status()["status"] == "private", 30,
                     "unreachable node private")
    served = sum(net.reachability.autonat.served["dial_error"] for net in nets
                 if net.reachability is not None)
    assert served >= 2  # the verdict came from dial-backs that failed, not from silence
    # auto: public nodes relay, the private one does not
    assert all(net.reachability_status()["relay"]["serving"] for net in nets)
    assert not hidden.reachability_status()["relay"]["serving"]


async def test_relayed_connection_is_upgraded_to_direct(nursery: trio.Nursery) -> None:
    """DCUtR: a relayed connection between a private and a public node becomes direct
    (the private side dials back; no namespaces needed for this case)."""
    relay = await start(nursery, make_net(relay_service="on", relay_reservations=1))
    seller = await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]],
                                           relay_reservations=1))
    await serve_echo(seller)
    await wait_until_async(lambda: relay.peer_id in seller.connected_peers(), 20, "seller up")
    await go_private(seller)
    await wait_until_async(lambda: len(seller.reachability_status()["reservations"]) == 1, 30,
                     "reservation")
    buyer = await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]]))
    await wait_until_async(lambda: relay.peer_id in buyer.connected_peers(), 20, "buyer up")
    circuit = next(a for a in seller.listen_addrs() if "/p2p-circuit" in a)
    await buyer.request(circuit, purchase_request(buyer), timeout_s=30)
    await wait_until_async(lambda: kind(buyer, seller) == "direct", 40, "direct connection")
    assert buyer.reachability is not None and seller.reachability is not None
    assert buyer.reachability.upgraded + seller.reachability.upgraded >= 1
    await buyer.request(seller.peer_id, purchase_request(buyer), timeout_s=30)


async def hop(net: NetService, relay: NetService, message: HopMessage) -> int:
    stream = await net.host.new_stream(ID.from_base58(relay.peer_id), [HOP_PROTOCOL_ID])
    try:
        with trio.fail_after(15):
            await write_delimited_msg(stream, message)
            answer = await read_delimited_msg(stream, HopMessage)
        return int(answer.status)
    finally:
        await stream.reset()


async def test_relay_refuses_a_looping_peer_and_bounds_reservations(nursery: trio.Nursery) -> None:
    # (almost) no refill: on a busy machine a slow loop must not earn tokens back
    relay = await start(nursery, make_net(relay_service="on", hole_punching=False,
                                          relay_max_reservations_per_ip=2,
                                          relay_hop_per_minute=0.001))
    attacker = await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]],
                                             hole_punching=False, relay_reservations=0))
    await wait_until_async(lambda: relay.peer_id in attacker.connected_peers(), 20, "attacker up")
    victim = ID.from_base58(make_net().peer_id)
    statuses = []
    for index in range(40):  # RESERVE for others' ids, and CONNECT to nobody, in a loop
        if index % 2:
            message = HopMessage(type=HopMessage.CONNECT, peer=CircuitPeerId(id=victim.to_bytes()))
        else:
            message = HopMessage(type=HopMessage.RESERVE, peer=CircuitPeerId(id=victim.to_bytes()))
        statuses.append(await hop(attacker, relay, message))
    refused = statuses.count(StatusCode.RESOURCE_LIMIT_EXCEEDED)
    assert refused == 40 - 10  # the burst (10), then refusals
    assert relay.reachability is not None
    protocol = relay.reachability.protocol
    assert protocol.refused["rate_limited"] == refused
    # A reservation is for the peer that asks: the victim holds none, the attacker one.
    held = set(protocol.resource_manager._reservations)
    assert held == {ID.from_base58(attacker.peer_id)}
    assert protocol.circuits == 0

    # Reservations per IP: the third peer from 127.0.0.1 is refused.
    others = [await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]],
                                            hole_punching=False, relay_reservations=0))
              for _ in range(2)]
    for other in others:
        await wait_until_async(lambda other=other: relay.peer_id in other.connected_peers(), 20, "up")
    answers = [await hop(other, relay, HopMessage(type=HopMessage.RESERVE)) for other in others]
    assert answers == [StatusCode.OK, StatusCode.RESERVATION_REFUSED]
    assert protocol.refused["reservations_per_ip"] == 1
    assert protocol.reservations() == 2


async def test_relay_bounds_circuits_per_peer_and_cuts_them_at_their_deadline(
        nursery: trio.Nursery) -> None:
    relay = await start(nursery, make_net(relay_service="on", hole_punching=False,
                                          relay_max_circuits_per_peer=1,
                                          relay_circuit_duration_s=2))
    target = await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]],
                                           hole_punching=False, relay_reservations=0))
    source = await start(nursery, make_net(bootstrap=[relay.listen_addrs()[0]],
                                           hole_punching=False, relay_reservations=0))
    await wait_until_async(lambda: relay.peer_id in target.connected_peers()
                     and relay.peer_id in source.connected_peers(), 20, "peers up")
    assert await hop(target, relay, HopMessage(type=HopMessage.RESERVE)) == StatusCode.OK
    assert relay.reachability is not None
    protocol = relay.reachability.protocol
    connect = HopMessage(type=HopMessage.CONNECT,
                         peer=CircuitPeerId(id=ID.from_base58(target.peer_id).to_bytes()))
    first = await source.host.new_stream(ID.from_base58(relay.peer_id), [HOP_PROTOCOL_ID])
    await write_delimited_msg(first, connect)
    with trio.fail_after(15):
        assert (await read_delimited_msg(first, HopMessage)).status == StatusCode.OK
    assert protocol.circuits == 1
    # A second circuit from the same peer is over its limit while the first one lives.
    assert await hop(source, relay, connect) == StatusCode.RESOURCE_LIMIT_EXCEEDED
    assert protocol.refused["circuits"] == 1
    # The first one is cut at its deadline, idle or not, and its slot freed.
    await wait_until_async(lambda: protocol.circuits == 0, 20, "circuit cut at its deadline")
    assert protocol.refused["circuit_duration"] == 1
