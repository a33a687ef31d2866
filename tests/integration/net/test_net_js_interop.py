"""Interop with a node nobody here wrote: a stock js-libp2p node (tests/support/js_gossip_peer.mjs,
js-libp2p 2.x and @chainsafe/libp2p-gossipsub from tools/, docs/protocol.md "Interop") dials a
real crystalmesh node over TCP, Noise and yamux, joins the skills topic over /meshsub/1.1.0 and
both ways carry listings byte for byte: what js publishes our validator accepts and the book's
handler receives; what we publish js receives as the very envelope we sealed. A js-published
envelope with a bad signature is a counted rejection that breaks nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from node.net.service import NetService
from protocol.envelope import open_envelope, seal
from protocol.identity import Identity
from protocol.messages import SkillListing
from protocol.topics import SKILLS
from tests.support.net import Inbox, make_listing, make_net
from tests.support.tools import missing_tool
from tests.support.wait import wait_until_async

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "support" / "js_gossip_peer.mjs"
NODE_MODULES = REPO / "tools" / "node_modules"
PACKAGES = ("libp2p", "@libp2p/tcp", "@chainsafe/libp2p-noise", "@chainsafe/libp2p-yamux",
            "@libp2p/identify", "@chainsafe/libp2p-gossipsub", "@multiformats/multiaddr")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sealed_listing(identity: Identity, name: str) -> bytes:
    issued = now_ms()
    return seal(identity, SkillListing.KIND, make_listing(identity, name=name, now_ms=issued),
                issued * 1000, issued)


class JsPeer:
    """The js node as a subprocess: its stdout events, and a pipe to make it publish."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.events: list[dict[str, Any]] = []

    async def read_events(self) -> None:
        assert self.process.stdout is not None
        buffered = b""
        while chunk := await self.process.stdout.receive_some(65536):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            self.events.extend(json.loads(line) for line in lines if line.strip())

    def first(self, event: str, **match: Any) -> dict[str, Any] | None:
        return next((e for e in self.events if e["event"] == event
                     and all(e.get(key) == value for key, value in match.items())), None)

    def received(self) -> list[bytes]:
        return [bytes.fromhex(e["data"]) for e in self.events if e["event"] == "message"]

    def published(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] in ("published", "publish_error")]

    async def publish(self, data: bytes) -> dict[str, Any]:
        """Have the js node publish ``data``; its report (recipients, or the error)."""
        assert self.process.stdin is not None
        before = len(self.published())
        await self.process.stdin.send_all(data.hex().encode() + b"\n")
        await wait_until_async(lambda: len(self.published()) > before, 10, "the js publish report")
        return self.published()[before]


@pytest.fixture
async def py_node(nursery: trio.Nursery) -> NetService:
    net = make_net()
    await nursery.start(net.run)
    return net


@pytest.fixture
async def js_peer(py_node: NetService, nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[JsPeer]:
    node_bin = shutil.which("node")
    if node_bin is None or not all((NODE_MODULES / package).is_dir() for package in PACKAGES):
        missing_tool("node and js-libp2p in tools/ (scripts/setup installs devnet/tools-package.json)")
    stderr = (tmp_path / "js_stderr.log").open("wb")
    process = await trio.lowlevel.open_process(
        [node_bin, str(SCRIPT), str(NODE_MODULES), py_node.listen_addrs()[0],
         py_node.gossip.wire_topic(SKILLS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        env=dict(os.environ) | {"DEBUG": ""},
    )
    peer = JsPeer(process)
    nursery.start_soon(peer.read_events)
    stopping = False

    async def watch() -> None:  # a js node that dies mid-test fails it at once
        await process.wait()
        if not stopping and process.returncode != 0:
            raise AssertionError((tmp_path / "js_stderr.log").read_text()[-3000:])

    nursery.start_soon(watch)
    try:
        yield peer
    finally:
        stopping = True
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        stderr.close()
        assert process.returncode == 0, (tmp_path / "js_stderr.log").read_text()[-3000:]


async def test_js_libp2p_reads_and_publishes_listings(py_node: NetService, js_peer: JsPeer) -> None:
    inbox = Inbox()
    inbox.attach(py_node)
    started = await wait_until_async(lambda: js_peer.first("started"), 20, "the js node to start")
    js_id = started["peer_id"]
    # Both sides see the other on the topic: the wire and the subscription exchange work.
    subscribed = await wait_until_async(lambda: js_peer.first("subscribed", peer=py_node.peer_id),
                                        20, "the js node to see ours on the skills topic")
    # js offers /meshsub/1.2.0, 1.1.0 and 1.0.0; docs/protocol.md's wire is 1.1.0.
    assert "/meshsub/1.1.0" in subscribed["streams"], subscribed
    # Our node publishes to its mesh only: the js node must be in it first.
    await wait_until_async(lambda: js_id in py_node.mesh_peers(SKILLS), 20,
                           "the js node in our mesh of the skills topic")

    # js -> py: an envelope sealed by a key of its own, published (and pubsub-signed) by js.
    from_js = sealed_listing(Identity.generate(), "from-js")
    report = await js_peer.publish(from_js)
    assert report == {"event": "published", "recipients": [py_node.peer_id]}, report
    await wait_until_async(lambda: [e.to_bytes() for e in inbox.listings] == [from_js], 20,
                           "the js listing in our book's handler")

    # py -> js: what we publish arrives as the envelope we sealed, from our peer id.
    sent = await py_node.publish(SKILLS, make_listing(py_node.identity, name="from-py",
                                                      now_ms=now_ms()))
    await wait_until_async(lambda: sent.to_bytes() in js_peer.received(), 20,
                           "our listing at the js node")
    message = js_peer.first("message", data=sent.to_bytes().hex())
    assert message is not None and message["from"] == py_node.peer_id
    opened = open_envelope(bytes.fromhex(message["data"]))
    assert (opened.kind, opened.sender, opened.body["name"]) == (
        SkillListing.KIND, py_node.identity.public_key, "from-py")

    # A bad envelope signature from js: rejected by our validator, counted against js.
    good = open_envelope(sealed_listing(Identity.generate(), "forged"))
    forged = dataclasses.replace(good, signature=bytes(64)).to_bytes()
    await js_peer.publish(forged)
    await wait_until_async(lambda: py_node.rejection_counts(js_id) == {"bad_signature": 1}, 20,
                           "the forged listing's rejection")

    # Nothing broke, nothing forged got in. The js peer paid for it (its score is below zero)
    # but one mistake is no graylist: it stays connected and its next listing is in.
    assert py_node.score(js_id) < 0
    again = sealed_listing(Identity.generate(), "from-js-again")
    await js_peer.publish(again)
    await wait_until_async(lambda: again in [e.to_bytes() for e in inbox.listings], 20,
                           "the next js listing")
    assert [e.to_bytes() for e in inbox.listings] == [from_js, again]
    assert js_id in py_node.connected_peers()
    assert py_node.pubsub.manager.is_running
