"""The optional LLM stage of search against a local stub of an OpenAI-compatible endpoint.

The stub is the one faked boundary (no model can run here): a real HTTP
server on 127.0.0.1 answering ``/v1/chat/completions`` as told. Real store,
real index, hashing embedder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from node.config import NodeConfig, load_config
from node.memory.async_memory import AsyncMemory
from node.memory.chat import LlmError, chat_completion
from node.memory.facade import Memory, SearchRequest
from node.memory.search.llm_stage import API_KEY_ENV, HYDE_SYSTEM, MAX_REPLY_BYTES, parse_order
from tests.support.local_http import serving

NOTES = [
    "The payouts worker stalled during the April incident.",
    "Carolina visited Lisbon in May.",
    "The payouts runbook is in the ops wiki.",
    "The payouts batcher limit is 500 transfers.",
]


@dataclass
class Stub:
    """What the fake endpoint answers, and what it was sent."""

    hyde: str = "The payouts worker stalled during the April incident."
    rank: str = "[4, 3, 2, 1]"
    mode: str = "ok"  # ok | http500 | garbage | huge | slow | notext
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            state.paths.append(self.path)
            if state.mode == "http500":
                self.send_response(500)
                self.end_headers()
                return
            if state.mode == "slow":
                time.sleep(2.0)  # the fake endpoint is slow; the client must give up first
            system = body["messages"][0]["content"]
            content: Any = state.hyde if system == HYDE_SYSTEM else state.rank
            if state.mode == "notext":
                content = {"not": "text"}
            payload = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": content}}]}
            )
            raw = payload.encode()
            if state.mode == "garbage":
                raw = b"\x00\xffnot json"
            if state.mode == "huge":
                raw = b'{"choices": [{"message": {"content": "' + b"1 " * MAX_REPLY_BYTES + b'"}}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            try:
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass

    with serving(Handler) as url:
        yield state, url


def _config(tmp_path: Path, url: str, **memory: Any) -> NodeConfig:
    settings = {"embedder": "hashing", "llm_url": url, "llm_model": "stub", "llm_timeout_s": 0.5}
    return load_config(tmp_path / "node", overrides={"memory": settings | memory}, environ={})


def _texts(memory: Memory, query: str, k: int = 4) -> list[str]:
    return [
        hit.crystal.text for hit in memory.search(SearchRequest(query, k=k, record_access=False))
    ]


def test_off_by_default_sends_nothing(tmp_path: Path, stub: tuple[Stub, str]) -> None:
    state, url = stub
    memory = Memory(_config(tmp_path, url))  # a URL but neither step asked for
    try:
        assert memory.llm is None
        for text in NOTES:
            memory.add(text)
        assert _texts(memory, "payouts")
    finally:
        memory.close()
    assert state.requests == []
    assert NodeConfig().memory.llm_url == ""


def test_rerank_follows_the_model_and_the_key_travels_in_a_header(
    tmp_path: Path, stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    monkeypatch.setenv(API_KEY_ENV, "sk-stub-secret")
    memory = Memory(_config(tmp_path, url, llm_rerank=True))
    try:
        for text in NOTES:
            memory.add(text)
        fused = _texts_without_llm(memory, "payouts")
        reranked = _texts(memory, "payouts", k=2)
    finally:
        memory.close()
    assert reranked == [fused[3], fused[2]]  # the stub answered [4, 3, 2, 1]; k=2 after the rerank
    assert state.paths == ["/v1/chat/completions"]
    assert state.headers[0]["Authorization"] == "Bearer sk-stub-secret"
    assert "sk-stub-secret" not in json.dumps(state.requests)
    prompt = state.requests[0]["messages"][1]["content"]
    assert prompt.startswith("Question: payouts") and "4. " in prompt


def _texts_without_llm(memory: Memory, query: str) -> list[str]:
    llm, memory.llm = memory.llm, None
    try:
        return _texts(memory, query)
    finally:
        memory.llm = llm


def test_hyde_passage_steers_the_dense_side(tmp_path: Path, stub: tuple[Stub, str]) -> None:
    state, url = stub
    state.hyde = "The batcher limit for payouts is 500 transfers per batch."
    memory = Memory(_config(tmp_path, url, llm_hyde=True))
    try:
        for text in NOTES:
            memory.add(text)
        # No word of the query is stored; only the stub's passage names the batcher.
        for query in ("zebra quokka", "aardvark", "yak yodel"):
            assert _texts(memory, query, k=1) == [NOTES[3]], query
    finally:
        memory.close()
    assert state.requests[0]["messages"][1]["content"] == "zebra quokka"


@pytest.mark.parametrize("mode", ["http500", "garbage", "huge", "slow", "notext"])
def test_a_broken_endpoint_never_fails_a_search(
    tmp_path: Path, stub: tuple[Stub, str], mode: str
) -> None:
    state, url = stub
    state.mode = mode
    memory = Memory(_config(tmp_path, url, llm_rerank=True, llm_hyde=True))
    try:
        for text in NOTES:
            memory.add(text)
        expected = _texts_without_llm(memory, "payouts runbook")
        assert _texts(memory, "payouts runbook") == expected
    finally:
        memory.close()
    assert state.requests  # the endpoint was asked, and its failure was absorbed


@pytest.mark.parametrize(("mode", "refusal"), [
    ("http500", "HTTP 500"), ("garbage", "not a chat completion"),
    ("huge", f"larger than {MAX_REPLY_BYTES} bytes"), ("notext", "not text"),
])
def test_the_chat_client_refuses_each_unusable_reply(
    stub: tuple[Stub, str], mode: str, refusal: str
) -> None:
    """What the search stage and the dream share (node.memory.chat), over real HTTP:
    every unusable answer is one LlmError naming why; a good one is its text."""
    state, url = stub
    body = {"model": "stub", "messages": [{"role": "system", "content": HYDE_SYSTEM},
                                          {"role": "user", "content": "q"}]}
    with httpx.Client(timeout=5.0) as client:
        assert chat_completion(client, f"{url}/chat/completions", body, MAX_REPLY_BYTES) == state.hyde
        state.mode = mode
        with pytest.raises(LlmError, match=refusal):
            chat_completion(client, f"{url}/chat/completions", body, MAX_REPLY_BYTES)


def test_unreachable_endpoint_is_absorbed(tmp_path: Path) -> None:
    memory = Memory(_config(tmp_path, "http://127.0.0.1:9/v1", llm_rerank=True))
    try:
        memory.add(NOTES[0])
        assert _texts(memory, "payouts") == [NOTES[0]]
    finally:
        memory.close()


def test_async_search_reranks_and_records_only_the_returned_hits(
    tmp_path: Path, stub: tuple[Stub, str]
) -> None:
    _, url = stub
    memory = Memory(_config(tmp_path, url, llm_rerank=True))
    try:
        for text in NOTES:
            memory.add(text)
        fused = _texts_without_llm(memory, "payouts")

        async def run() -> list[str]:
            hits = await AsyncMemory(memory).search(SearchRequest("payouts", k=1))
            return [hit.crystal.text for hit in hits]

        assert trio.run(run) == [fused[3]]
        counts = {
            row[0]: row[1] for row in memory.db.all("SELECT text, access_count FROM crystals")
        }
        assert counts[fused[3]] == 1 and sum(counts.values()) == 1
    finally:
        memory.close()


@given(st.text(max_size=500), st.integers(min_value=0, max_value=30))
def test_parse_order_is_always_a_permutation(reply: str, count: int) -> None:
    assert sorted(parse_order(reply, count)) == list(range(count))


def test_parse_order_hand_worked() -> None:
    assert parse_order("[3, 1, 3, 99, 0]", 4) == [2, 0, 1, 3]
