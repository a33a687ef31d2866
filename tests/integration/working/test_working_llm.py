"""The LLM synthesiser against a local OpenAI-compatible stub server.

The stub is the one faked boundary of working memory (no model runs here); it
speaks the real wire format (POST /v1/chat/completions, bearer key, JSON) over
real HTTP, and everything on our side of it is the product's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from node.config import NodeConfig
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend
from node.memory.working.build import synthesiser_for
from node.memory.working.dream.llm import MAX_REPLY_BYTES, LlmSynthesiser
from node.memory.working.state import SECTIONS, parse_state
from node.memory.working.working import WorkingMemory
from tests.support.local_http import serving

GOOD_REPLY = "\n\n".join(
    f"{heading}\n\n- {key}: the stub model says something substantive here" for key, heading in SECTIONS
).replace("- pointers:", "- Past: backup retention → search: `acme-backups-eu retention`\n- pointers:")


class Stub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.body: bytes = b""

    def reply(self, content: str) -> None:
        self.status = 200
        self.body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                   "body": json.loads(self.rfile.read(length))})
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        yield state, url


def llm_working(memory: Memory, config: NodeConfig, url: str) -> WorkingMemory:
    config.memory.dream_synthesiser = "llm"
    config.memory.dream_llm_url = url
    config.memory.dream_llm_model = "stub-model"
    config.memory.dream_llm_key_env = "F15_TEST_LLM_KEY"
    config.memory.dream_llm_timeout_s = 10
    return WorkingMemory(config.data_dir, MemoryBackend(memory), synthesiser=synthesiser_for(config.memory))


def test_llm_dream_sends_the_seed_prompt_and_writes_its_state(
        memory: Memory, node_config: NodeConfig, stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch) -> None:
    server, url = stub
    monkeypatch.setenv("F15_TEST_LLM_KEY", "sk-local-test-key")
    memory.add("Nightly backup job writes to bucket acme-backups-eu with 30 day retention")
    wm = llm_working(memory, node_config, url)
    wm.note("User's name is Douglas", 0.8)
    server.reply("```markdown\n# Working Memory State\n\n" + GOOD_REPLY + "\n```")

    result = wm.dream()

    assert result.status == "written" and result.synthesiser == "llm", result
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-local-test-key"
    assert request["body"]["model"] == "stub-model"
    system, user = request["body"]["messages"]
    assert all(heading in system["content"] for _, heading in SECTIONS)
    for block in ("## Old State", "## Scratch Delta", "User's name is Douglas", "## New Crystals",
                  "## Hormonal State", "Section weights"):
        assert block in user["content"]
    text = wm.state_path.read_text()
    assert text.startswith("# Working Memory State\n\n_Last dream: ")
    assert "the stub model says" in parse_state(text).sections["bond"]
    assert result.pointers and result.pointers[0]["keywords"] == "acme-backups-eu retention"
    assert wm.pending_notes() == []


@pytest.mark.parametrize("failure", ["http_500", "not_json", "missing_sections", "oversize"])
def test_a_failing_endpoint_falls_back_to_the_extractive_synthesiser(
        memory: Memory, node_config: NodeConfig, stub: tuple[Stub, str], failure: str) -> None:
    server, url = stub
    if failure == "http_500":
        server.status, server.body = 500, b"{}"
    elif failure == "not_json":
        server.body = b"<html>gateway</html>"
    elif failure == "missing_sections":
        server.reply("## The Bond\n\n- only one section")
    else:
        server.reply("## The Bond\n\n" + "x" * MAX_REPLY_BYTES)
    wm = llm_working(memory, node_config, url)
    wm.note("User prefers short answers", 0.8)

    result = wm.dream()

    assert result.status == "written" and result.synthesiser == "extractive"
    assert result.reason and "LLM" in result.reason
    assert "User prefers short answers" in wm.state_path.read_text()


def test_an_empty_llm_synthesis_is_rejected_by_the_guard(
        memory: Memory, node_config: NodeConfig, stub: tuple[Stub, str]) -> None:
    server, url = stub
    server.reply("\n\n".join(heading for _, heading in SECTIONS))
    wm = llm_working(memory, node_config, url)
    wm.note("User prefers short answers", 0.8)
    result = wm.dream()
    assert result.status == "rejected" and (result.reason or "").startswith("empty synthesis")
    assert not wm.state_path.exists() and len(wm.pending_notes()) == 1


def test_unreachable_endpoint_and_bad_config() -> None:
    with pytest.raises(Exception, match="http"):
        LlmSynthesiser("file:///etc/passwd", "m")
    with pytest.raises(Exception, match="model"):
        LlmSynthesiser("http://127.0.0.1:9/v1", "")
