"""Working memory inside a trio node: notes and dreams run off the event loop and off the
memory writer, so a dream waiting on a slow LLM blocks neither."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import trio

from node.config import NodeConfig
from node.memory.async_memory import AsyncMemory
from node.memory.facade import Memory, SearchRequest
from node.memory.working.service import WorkingMemoryService
from node.memory.working.state import SECTIONS
from tests.support.local_http import serving


def Node(config: NodeConfig, memory: Memory) -> WorkingMemoryService:
    return WorkingMemoryService(config, AsyncMemory(memory), memory)


@pytest.fixture
def slow_llm() -> Iterator[tuple[str, threading.Event, threading.Event, threading.Event]]:
    """A chat-completions stub that answers only once ``release`` is set."""
    arrived, release, answered = threading.Event(), threading.Event(), threading.Event()
    reply = json.dumps({"choices": [{"message": {"content": "\n\n".join(
        f"{heading}\n\n- the slow model's line for {key}, long enough" for key, heading in SECTIONS)}}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            arrived.set()
            release.wait(30)
            answered.set()
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        try:
            yield url, arrived, release, answered
        finally:
            release.set()  # before the shutdown: a handler waiting on it must return


async def test_note_dream_and_context_through_the_node(memory: Memory, node_config: NodeConfig) -> None:
    node = Node(node_config, memory)
    noted = await node.note("User's name is Douglas, prefers tabs", 0.8)
    assert noted["crystal"] == "indexed" and noted["namespace"] == "default"
    hits = await node.memory.search(SearchRequest("Douglas tabs", 3))
    assert hits[0].crystal.id == noted["crystal_id"]
    context = await node.context(32_000)
    assert "Unsynthesized Notes" in context["context"] and "Douglas" in context["context"]
    dreamt = await node.dream()
    assert dreamt["status"] == "written" and dreamt["consumed_notes"] == 1
    assert "Douglas" in (await node.context(200_000))["context"]
    other = await node.note("agent-specific note", 0.5, "agent:planner")
    assert other["namespace"] == "agent:planner"
    assert node._dream_namespaces() == ["agent:planner", "default"]


async def test_a_dream_waiting_on_the_llm_holds_neither_loop_nor_database(
        memory: Memory, node_config: NodeConfig,
        slow_llm: tuple[str, threading.Event, threading.Event, threading.Event]) -> None:
    url, arrived, release, answered = slow_llm
    node_config.memory.dream_synthesiser = "llm"
    node_config.memory.dream_llm_url = url
    node_config.memory.dream_llm_model = "slow"
    node = Node(node_config, memory)
    await node.note("first note before the dream", 0.7)
    results: dict[str, Any] = {}

    async def dream() -> None:
        results["dream"] = await node.dream()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(dream)
        await trio.to_thread.run_sync(arrived.wait, 60)
        # the LLM has the request and has not answered: memory and notes still work
        hits = await node.memory.search(SearchRequest("first note", 3))
        assert hits and hits[0].crystal.text == "first note before the dream"
        during = await node.note("written while the model thinks", 0.6)
        assert during["crystal"] == "indexed"
        assert not answered.is_set()  # both answered while the dream was still waiting
        release.set()
    assert results["dream"]["status"] == "written" and results["dream"]["synthesiser"] == "llm"
    pending = [n["text"] for n in [n.to_dict() for n in node.working_memory().pending_notes()]]
    assert pending == ["written while the model thinks"]  # only the notes the dream read were cleared
