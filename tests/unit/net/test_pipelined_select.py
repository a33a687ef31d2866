"""One round trip to open a stream (node.net.libp2p_tuning, 18.): the multistream header
and the first protocol go out in one write, against py-libp2p's own listener.

The client and the library's ``Multiselect`` listener talk over an in-memory pipe; the
client's pipe end records its writes and reads, so the test sees how many times the client
had to wait for the other side before it could go on.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from libp2p.custom_types import TProtocol
from libp2p.protocol_muxer.exceptions import MultiselectClientError
from libp2p.protocol_muxer.multiselect import Multiselect
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator

from node.net import libp2p_tuning

WANTED = TProtocol("/crystalmesh/test/purchase/2")
UNKNOWN = TProtocol("/crystalmesh/test/purchase/9")


class Pipe:
    """A ``ReadWriteCloser`` over one end of a trio memory stream, noting each operation."""

    def __init__(self, stream: Any, log: list[str] | None = None) -> None:
        self.stream = stream
        self.log = log
        self.wrote_since_read = False

    async def write(self, data: bytes) -> None:
        if self.log is not None:
            self.log.append("write")
        await self.stream.send_all(data)

    async def read(self, n: int | None = None) -> bytes:
        if self.log is not None:
            self.log.append("read")
        return bytes(await self.stream.receive_some(n))

    async def close(self) -> None:
        await self.stream.aclose()

    def get_remote_address(self) -> None:
        return None


async def _select(protocols: list[TProtocol]) -> tuple[Any, list[str]]:
    client_end, listener_end = trio.testing.memory_stream_pair()
    log: list[str] = []
    listener = Multiselect({WANTED: None})
    client = libp2p_tuning.PipelinedMultiselectClient()
    found: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        async def listen() -> None:
            try:
                found["listener"] = await listener.negotiate(
                    MultiselectCommunicator(Pipe(listener_end)), 5)
            except Exception as error:  # the client gave up: the listener's read fails
                found["listener"] = error

        nursery.start_soon(listen)
        try:
            found["client"] = await client.select_one_of(
                protocols, MultiselectCommunicator(Pipe(client_end, log)), 5)
        except MultiselectClientError as error:
            found["client"] = error
        nursery.cancel_scope.cancel()  # the listener waits for a next protocol
    return found["client"], log


async def test_the_header_and_the_protocol_go_out_in_one_write() -> None:
    selected, log = await _select([WANTED])
    assert selected == WANTED
    # The library's lock-step selection is write, read, write, read: two round trips.
    assert log[0] == "write" and "write" not in log[1:]


async def test_a_refused_first_protocol_falls_back_to_the_next() -> None:
    selected, log = await _select([UNKNOWN, WANTED])
    assert selected == WANTED
    assert log.count("write") == 2


async def test_no_protocol_the_listener_speaks_is_an_error() -> None:
    refused, _ = await _select([UNKNOWN])
    assert isinstance(refused, MultiselectClientError) and "not supported" in str(refused)


def test_hosts_built_after_apply_use_it() -> None:
    import libp2p.host.basic_host as basic_host_module

    libp2p_tuning.apply()
    assert basic_host_module.MultiselectClient is libp2p_tuning.PipelinedMultiselectClient
