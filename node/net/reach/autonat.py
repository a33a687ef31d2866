"""AutoNAT v1: is this node reachable from the network, or behind a NAT?

A node asks peers it is directly connected to to dial it back
(``/libp2p/autonat/1.0.0``, py-libp2p's wire format and server/client
halves) and keeps their verdicts; the status is ``public``, ``private`` or
``unknown``. It decides whether this node relays for others
(``net.relay_service = auto``) and whether it holds relay reservations.

What is fixed around py-libp2p 0.8.1's ``AutoNATService`` (read in
``libp2p/host/autonat/autonat.py``):

- Its dial-back is ``host.connect``, which returns at once when a connection
  to the peer exists — and one always does, since the peer just asked over
  it. Every node was "public". Here the dial-back is a fresh TCP connection
  and a Noise handshake that proves the peer id, then closed
  (``_try_dial``), under ``DIAL_TIMEOUT_S`` per address.
- It only dials advertised addresses whose IP is the observed one; a node
  behind NAT advertises its LAN address, so every server refused and no
  verdict ever came. Here the server also dials the observed IP on each
  advertised TCP port (a port forward or a port-preserving NAT): still only
  the requester's own IP, so no amplification.
- The server had no read timeout, no rate limit and no bound on concurrent
  dial-backs: here ``per_minute``/``burst`` requests per peer and
  ``max_dialbacks`` at once (refused beyond: ``E_DIAL_REFUSED``).
- The client counted a server it could not even ask, and a refusal, as
  "private". Here only dial outcomes are verdicts (``OK`` or
  ``E_DIAL_ERROR``).

Verdicts: the last ``MAX_VERDICTS`` servers' answers count. With ``need`` =
min(``confirmations``, servers available), the status is ``public`` when at
least ``need`` servers reached us and no more failed; ``private`` when at least
``need`` failed and fewer reached us. A node with no direct address to offer
is private without asking.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import multiaddr
import trio
from libp2p.abc import IHost, INetStream
from libp2p.host.autonat.autonat import AUTONAT_PROTOCOL_ID, AutoNATService, AutoNATStatus
from libp2p.host.autonat.pb.autonat_pb2 import Message
from libp2p.peer.id import ID
from libp2p.utils.varint import encode_varint_prefixed, read_varint_prefixed_bytes_limited

from node.net import libp2p_compat
from node.net.reach.relay_client import is_circuit
from node.net.rules import TokenBuckets

logger = logging.getLogger(__name__)

PUBLIC, PRIVATE, UNKNOWN = "public", "private", "unknown"
_NAMES = {AutoNATStatus.PUBLIC: PUBLIC, AutoNATStatus.PRIVATE: PRIVATE,
          AutoNATStatus.UNKNOWN: UNKNOWN}
DIAL_TIMEOUT_S = 5.0
MAX_DIAL_ADDRS = 4
READ_TIMEOUT_S = 10.0
QUERY_TIMEOUT_S = 30.0
MAX_VERDICTS = 8
MAX_MESSAGE_BYTES = 8 * 1024
NOT_A_SERVER_S = 600.0


class AutoNat(AutoNATService):
    def __init__(self, host: IHost, confirmations: int = 2,
                 addrs: Callable[[], list[multiaddr.Multiaddr]] | None = None,
                 per_minute: float = 6.0, burst: int = 3, max_dialbacks: int = 4,
                 on_change: Callable[[str], None] = lambda status: None) -> None:
        super().__init__(host, serve=False, confirmations=confirmations)  # type: ignore[arg-type]
        self.addrs = addrs or (lambda: [a for a in host.get_addrs() if not is_circuit(a)])
        self._buckets = TokenBuckets(per_minute, burst)
        self._dialbacks = trio.Semaphore(max_dialbacks)
        self.on_change = on_change
        self.verdicts: OrderedDict[ID, bool] = OrderedDict()
        self._not_server: dict[ID, float] = {}
        self.served = {"ok": 0, "dial_error": 0, "refused": 0}
        host.set_stream_handler(AUTONAT_PROTOCOL_ID, self.handle_stream)

    @property
    def reachability(self) -> str:
        return _NAMES.get(self.status, UNKNOWN)

    # ------------------------------------------------------------------ server
    async def handle_stream(self, stream: INetStream) -> None:
        peer = stream.muxed_conn.peer_id
        try:
            with trio.fail_after(READ_TIMEOUT_S):
                request = Message()
                request.ParseFromString(
                    await read_varint_prefixed_bytes_limited(stream, MAX_MESSAGE_BYTES))
            if not self._buckets.allows(peer) or self._dialbacks.value == 0:
                response = _refusal("rate limited")
            else:
                self._buckets.spend(peer)
                async with self._dialbacks:
                    with trio.fail_after(DIAL_TIMEOUT_S * MAX_DIAL_ADDRS + 1):
                        response = await self._answer(request, stream)
            status = response.dialResponse.status
            key = {Message.OK: "ok", Message.E_DIAL_ERROR: "dial_error"}.get(status, "refused")
            self.served[key] += 1
            with trio.fail_after(READ_TIMEOUT_S):
                await stream.write(encode_varint_prefixed(response.SerializeToString()))
            await stream.close()
        except Exception as error:  # a bad request ends its stream, nothing else
            logger.debug("autonat request from %s dropped: %r", peer, error)
            try:
                await stream.reset()
            except Exception:
                pass

    async def _answer(self, request: Message, stream: INetStream) -> Message:
        if request.type != Message.DIAL:
            return _refusal("unknown message type", Message.E_BAD_REQUEST)
        if _over_relay(stream):
            return _refusal("dial requests over relayed connections are refused")
        if request.dial.peer.id and request.dial.peer.id != stream.muxed_conn.peer_id.to_bytes():
            return _refusal("a peer asks for itself only", Message.E_BAD_REQUEST)
        observed = libp2p_compat.observed_ip(self, stream)
        candidates = _dial_candidates([bytes(a) for a in request.dial.peer.addrs], observed)
        if not candidates:
            return _refusal("no address on the observed IP")
        return await libp2p_compat.handle_dial(self, _with_addrs(request, candidates), observed,
                                               False)

    async def _try_dial(self, peer_id: ID, addrs: list[bytes]) -> bytes | None:
        """A fresh connection per address (never the one the request came on)."""
        network: Any = self.host.get_network()
        for raw_addr in addrs:
            addr = multiaddr.Multiaddr(raw_addr)
            try:
                with trio.fail_after(DIAL_TIMEOUT_S):
                    transport = network.transport_manager.transport_for_dialing(addr)
                    if transport is None:
                        continue
                    raw = await transport.dial(addr)
                    try:
                        secured = await network.upgrader.upgrade_security(raw, True, peer_id)
                        await secured.close()
                    finally:
                        await raw.close()
                return raw_addr
            except Exception as error:
                logger.debug("autonat dial-back to %s failed: %r", addr, error)
        return None

    # ------------------------------------------------------------------ client
    def servers(self) -> list[ID]:
        now = trio.current_time()
        for peer in [peer for peer, until in self._not_server.items() if until <= now]:
            del self._not_server[peer]
        out = []
        for peer in self.host.get_connected_peers():
            if self._not_server.get(peer, 0.0) > now:
                continue
            connections = self.host.get_network().connections.get(peer, []) or []
            if any(not _conn_relayed(conn) for conn in connections):
                out.append(peer)
        return out

    async def check(self) -> str:
        """One round: ask up to three servers (least recently asked first); the status."""
        addrs = self.addrs()
        if not addrs:
            self._set(AutoNATStatus.PRIVATE)
            return self.reachability
        servers = self.servers()
        fresh = [peer for peer in servers if peer not in self.verdicts]
        asked = (fresh + [peer for peer in self.verdicts if peer in servers])[:3]
        async with trio.open_nursery() as nursery:
            for server in asked:
                nursery.start_soon(self._ask, server, [a.to_bytes() for a in addrs])
        while len(self.verdicts) > MAX_VERDICTS:
            self.verdicts.popitem(last=False)
        self._decide(len(servers) + sum(1 for peer in self.verdicts if peer not in servers))
        return self.reachability

    async def _ask(self, server: ID, addrs: list[bytes]) -> None:
        try:
            status, _ = await self.query_server(server, addrs, timeout=QUERY_TIMEOUT_S)
        except Exception as error:
            logger.debug("autonat server %s did not answer: %r", server, error)
            self._not_server[server] = trio.current_time() + NOT_A_SERVER_S
            self.dial_results.pop(server, None)
            return
        self.dial_results.pop(server, None)  # the library's table is not ours
        if status in (Message.OK, Message.E_DIAL_ERROR):
            self.verdicts.pop(server, None)
            self.verdicts[server] = status == Message.OK

    def _decide(self, available: int) -> None:
        need = max(1, min(self.confirmations, available))
        reached = sum(1 for ok in self.verdicts.values() if ok)
        failed = len(self.verdicts) - reached
        if reached >= need and reached >= failed:
            self._set(AutoNATStatus.PUBLIC)
        elif failed >= need and failed > reached:
            self._set(AutoNATStatus.PRIVATE)

    def _set(self, status: int) -> None:
        if status != self.status:
            self.status = status
            logger.info("reachability %s", self.reachability)
            self.on_change(self.reachability)

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED,
                  fast_s: float = 3.0, interval_s: float = 120.0) -> None:
        """Check every ``fast_s`` until the status is known, then every ``interval_s``."""
        task_status.started()
        while True:
            try:
                await self.check()
            except Exception as error:
                logger.debug("autonat round failed: %r", error)
            await trio.sleep(fast_s if self.status == AutoNATStatus.UNKNOWN else interval_s)


def _refusal(text: str, status: Any = Message.E_DIAL_REFUSED) -> Message:
    response = Message()
    response.type = Message.DIAL_RESPONSE
    response.dialResponse.status = status
    response.dialResponse.statusText = text
    return response


def _with_addrs(request: Message, addrs: list[bytes]) -> Message:
    message = Message()
    message.CopyFrom(request)
    del message.dial.peer.addrs[:]
    message.dial.peer.addrs.extend(addrs)
    return message


def _dial_candidates(addrs: list[bytes], observed_ip: str | None) -> list[bytes]:
    """The observed IP on each advertised TCP port (covers advertised addresses on that IP)."""
    if observed_ip is None:
        return []
    version = "ip6" if ":" in observed_ip else "ip4"
    out: list[bytes] = []
    for raw in addrs[:16]:
        try:
            addr = multiaddr.Multiaddr(raw)
            port = addr.value_for_protocol("tcp")
        except Exception:
            continue
        if is_circuit(addr) or not port:
            continue
        candidate = multiaddr.Multiaddr(f"/{version}/{observed_ip}/tcp/{port}").to_bytes()
        if candidate not in out:
            out.append(candidate)
    return out[:MAX_DIAL_ADDRS]


def _conn_relayed(connection: Any) -> bool:
    try:
        return any(is_circuit(addr) for addr in connection.get_transport_addresses() or ())
    except Exception:
        return False


def _over_relay(stream: INetStream) -> bool:
    return _conn_relayed(stream.muxed_conn)
