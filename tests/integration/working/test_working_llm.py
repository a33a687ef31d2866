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

        self.classify_body: bytes | None = None  # the answer to a classification request, if set

    def reply(self, content: str) -> None:
        self.status = 200
        self.body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()

    def classify_reply(self, content: str) -> None:
        self.classify_body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()

    def answer(self, request: dict[str, Any]) -> bytes:
        if self.classify_body is not None and is_classification(request):
            return self.classify_body
        return self.body


def is_classification(request: dict[str, Any]) -> bool:
    return str(request["body"]["messages"][0]["content"]).startswith("You classify")


def state_requests(server: Stub) -> list[dict[str, Any]]:
    """The state-update requests (a dream may also have asked to classify its insights)."""
    return [request for request in server.requests if not is_classification(request)]


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                   "body": json.loads(self.rfile.read(length))})
            body = state.answer(state.requests[-1])
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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
    [request] = state_requests(server)
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


def test_the_llm_classifies_insights_and_only_proposes_directives(
        memory: Memory, node_config: NodeConfig, stub: tuple[Stub, str]) -> None:
    """Issue 35, item 2, against the STUB endpoint (no model runs): the classification
    sets type and epistemic layer; a directive is only proposed until the user confirms."""
    server, url = stub
    server.reply("```markdown\n# Working Memory State\n\n" + GOOD_REPLY + "\n```")
    server.classify_reply(json.dumps({"items": [
        {"index": 0, "type": "preference", "layer": "world_fact"},
        {"index": 1, "type": "preference", "layer": "directive"},
        {"index": 7, "type": "fact", "layer": "world_fact"},  # no such candidate: ignored
        {"index": 2, "type": "gossip", "layer": "world_fact"},  # unknown type: the rules' kind stays
    ]}))
    wm = llm_working(memory, node_config, url)
    wm.note("I prefer dark roast coffee in the morning", 0.8)
    wm.note("Never use semicolons at the end of JavaScript lines", 0.9)
    wm.note("We decided to keep the billing ledger in Postgres", 0.8)

    result = wm.dream()

    assert result.insights["classified_by"] == "llm" and result.insights["proposals"] == 1
    assert [r for r in server.requests if is_classification(r)]
    crystals = {c.text: c for c in memory.store.list_crystals(limit=50) if c.origin.value == "dream"}
    coffee = crystals["Preference: I prefer dark roast coffee in the morning"]
    assert coffee.semantic_type.value == "preference" and coffee.to_dict()["epistemicLayer"] == "world_fact"
    semicolons = crystals["Preference: Never use semicolons at the end of JavaScript lines"]
    assert semicolons.to_dict()["epistemicLayer"] == "mental_model"  # not a directive by itself
    assert crystals["Decision: We decided to keep the billing ledger in Postgres"].semantic_type.value == "insight"
    # Never adopted silently: no directive exists until the user confirms the proposal.
    assert not [c for c in memory.store.list_crystals(limit=50) if c.semantic_type.value == "directive"]
    [proposal] = wm.proposals()
    assert proposal["text"] == "Never use semicolons at the end of JavaScript lines"
    assert proposal["status"] == "pending" and proposal["source_ids"]

    adopted = wm.decide_proposal(proposal["id"], adopt=True)
    assert adopted["status"] == "adopted"
    directive = memory.store.get(adopted["crystal_id"])
    assert directive.semantic_type.value == "directive"
    assert directive.text.endswith("Never use semicolons at the end of JavaScript lines")
    assert wm.proposals() == [] and wm.proposals(None)[0]["status"] == "adopted"
    with pytest.raises(Exception, match="already adopted"):
        wm.decide_proposal(proposal["id"], adopt=False)


@pytest.mark.parametrize("reply", [
    "[" * 5000 + "]" * 5000,  # deep nesting: refused before json.loads recurses
    '{"items": "not a list"}',
    "the model rambles instead of answering JSON",
    '{"items": [{"index": true, "type": "fact", "layer": "directive"}, {"index": 0, "type": "fact"}]}',
])
def test_a_hostile_classification_keeps_the_rules_kinds_and_proposes_nothing(
        memory: Memory, node_config: NodeConfig, stub: tuple[Stub, str], reply: str) -> None:
    server, url = stub
    server.reply("```markdown\n# Working Memory State\n\n" + GOOD_REPLY + "\n```")
    server.classify_reply(reply)
    wm = llm_working(memory, node_config, url)
    wm.note("Never use semicolons at the end of JavaScript lines", 0.9)
    result = wm.dream()
    assert result.status == "written" and result.insights["created"] == 1
    assert result.insights["proposals"] == 0 and wm.proposals() == []
    [insight] = [c for c in memory.store.list_crystals(limit=20) if c.origin.value == "dream"]
    assert insight.semantic_type.value == "insight"
