"""py-libp2p 0.8.1 connection patches: no trim under a request, one round trip to open a stream.

Numbered as in the package's index (``node.net.libp2p_tuning``); ``patch()`` applies them.

14. A connection carrying a request is never trimmed (py-libp2p 0.8.1,
   ``Swarm._trim_connections`` in ``libp2p/network/swarm.py``). With one
   connection per peer (``node.net.host``), a second connection to the same
   peer makes the swarm close the older one at once unless it is younger than
   the 20 s grace period, whatever streams it carries. A DCUtR hole punch that
   succeeds on a later attempt (more than 20 s after the relayed connection
   opened) thus killed the relayed connection under a purchase in flight.
   The replacement is the library's rule plus one: a connection with an open
   stream other than pubsub's (which reopens on the connection that stays) is
   not a candidate; it stays until DCUtR closes the relayed leg after its
   60 s grace, by when new streams use the direct connection.

18. One round trip to open a stream (issue 36). ``BasicHost.new_stream`` selects the
   protocol with multistream-select the lock-step way: the header, wait for the
   header, the protocol, wait for the answer; with the request that makes three round
   trips for one purchase (a voucher purchase over 40 ms links took 275 ms, 13 ms of it
   work). The client sends the header and its first protocol in one write and reads both
   answers (what go-libp2p and js-libp2p clients do; py-libp2p's listener reads message
   by message, so it sees the same bytes): one round trip less. A ``na`` for the first
   protocol falls back to the library's one-at-a-time ``try_select`` for the others.
   Only the host's streams: the connection upgrade (security, muxer) is untouched.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import libp2p.host.basic_host as basic_host_module
import libp2p.network.swarm as swarm_module
import trio
from libp2p.io.exceptions import (
    IOException,
)
from libp2p.network.stream.exceptions import StreamError
from libp2p.protocol_muxer.exceptions import (
    MultiselectClientError,
    MultiselectCommunicatorError,
    ProtocolNotSupportedError,
)
from libp2p.protocol_muxer.multiselect_client import DEFAULT_NEGOTIATE_TIMEOUT, MultiselectClient
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.utils.varint import encode_delim

logger = logging.getLogger(__name__)


_LONG_LIVED_PREFIXES = ("/meshsub/", "/floodsub/")


def _carries_requests(connection: Any) -> bool:
    """Whether ``connection`` has an open stream other than pubsub's (module doc, 14.)."""
    try:
        streams = list(connection.get_streams())
    except Exception:
        return False
    for stream in streams:
        try:
            protocol = str(stream.get_protocol() or "")
        except Exception:
            protocol = ""
        if not protocol.startswith(_LONG_LIVED_PREFIXES):
            return True
    return False


def _trim_connections(self: Any, peer_id: Any) -> None:
    """``Swarm._trim_connections`` that never closes a connection carrying a request (14.)."""
    connections = self.connections.get(peer_id, [])
    keep_at_most = self.connection_config.max_connections_per_peer
    if len(connections) <= keep_at_most:
        return
    grace_s = self.connection_config.grace_period
    now = time.time()
    candidates: list[tuple[int, float, Any]] = []
    for connection in connections:
        created = getattr(connection, "_created_at", None)
        if isinstance(created, int | float) and now - created < grace_s:
            continue
        try:
            if self.tag_store.is_protected(connection.muxed_conn.peer_id):
                continue
        except Exception:
            pass
        if _carries_requests(connection):
            continue
        try:
            streams = len(connection.get_streams())
        except Exception:
            streams = 0
        candidates.append((streams, float(created or 0.0), connection))
    candidates.sort(key=lambda item: (item[0], item[1]))
    trimmed = [item[2] for item in candidates[: max(0, len(connections) - keep_at_most)]]
    for connection in trimmed:
        self.cleanup_connection_health(peer_id, connection)
        try:
            self.manager.run_task(self._close_connection_async, connection)
        except Exception:
            nursery = getattr(self, "background_nursery", None)
            if nursery is not None:
                nursery.start_soon(self._close_connection_async, connection)
    gone = {id(connection) for connection in trimmed}
    self.connections[peer_id] = [c for c in self.connections[peer_id] if id(c) not in gone]


_MULTISELECT = "/multistream/1.0.0"
_NOT_SUPPORTED = "na"


class PipelinedMultiselectClient(MultiselectClient):
    """Item 18: the multistream header and the first protocol in one write."""

    async def select_one_of(self, protocols: Any, communicator: Any,
                            negotiate_timeout: int = DEFAULT_NEGOTIATE_TIMEOUT) -> Any:
        if not protocols or not isinstance(communicator, MultiselectCommunicator):
            return await super().select_one_of(protocols, communicator, negotiate_timeout)
        first = protocols[0]
        with trio.move_on_after(negotiate_timeout):
            try:
                await communicator.read_writer.write(
                    encode_delim(_MULTISELECT.encode()) + encode_delim(str(first).encode()))
            except (IOException, AssertionError, ValueError, StreamError) as error:
                raise MultiselectClientError(f"handshake write failed: {error}") from error
            try:
                header = await communicator.read()
                answer = await communicator.read()
            except MultiselectCommunicatorError as error:
                raise MultiselectClientError(f"handshake read failed: {error}") from error
            if header != _MULTISELECT:
                raise MultiselectClientError(f"multiselect protocol ID mismatch: got {header!r}")
            if answer == str(first):
                return first
            if answer != _NOT_SUPPORTED:
                raise MultiselectClientError(f"unrecognized response: {answer!r}, "
                                             f"protocol={first}")
            refused = [f"protocol not supported: {first}"]
            for protocol in protocols[1:]:
                try:
                    return await self.try_select(communicator, protocol)
                except ProtocolNotSupportedError as error:
                    refused.append(str(error))
            raise MultiselectClientError(f"protocols not supported: {'; '.join(refused)}")
        raise MultiselectClientError(f"response timed out after {negotiate_timeout}s, "
                                     f"protocols tried: {list(protocols)}")



def patch() -> None:
    """Items 14 and 18 (``apply()`` runs it once)."""
    swarm_module.Swarm._trim_connections = _trim_connections  # type: ignore[method-assign]
    basic_host_module.MultiselectClient = PipelinedMultiselectClient  # type: ignore[misc]
