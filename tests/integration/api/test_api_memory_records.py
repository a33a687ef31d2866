"""Memory records over the real local API (NodeService on 127.0.0.1, real HTTP): add outcomes,
namespaces, PATCH/DELETE/history, and hostile requests that change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from node.service import NodeService
from tests.support.api import call


async def ok(node: NodeService, method: str, path: str, body: Any = None, **params: Any) -> Any:
    response = await call(node, method, path, body, params or None)
    assert response.status_code == 200, response.text
    return response.json()


async def test_records_through_the_api(node: NodeService) -> None:
    text = "The release train leaves every second Tuesday"
    mine = await ok(node, "POST", "/v1/crystals", {"text": text, "namespace": "user:jonas"})
    theirs = await ok(node, "POST", "/v1/crystals", {"text": text, "namespace": "agent:planner"})
    assert (mine["outcome"], theirs["outcome"]) == ("created", "created") and mine["id"] != theirs["id"]
    same = await ok(node, "POST", "/v1/crystals", {"text": text, "namespace": "user:jonas",
                                                   "scope": "public"})
    assert same["outcome"] == "exists" and same["differs"]["scope"]["requested"] == "public"

    hits = await ok(node, "POST", "/v1/crystals/search", {"query": "release train", "namespace": "user:jonas"})
    assert [h["id"] for h in hits["hits"]] == [mine["id"]]
    everywhere = await ok(node, "POST", "/v1/crystals/search", {"query": "release train",
                                                                "all_namespaces": True})
    assert {h["id"] for h in everywhere["hits"]} == {mine["id"], theirs["id"]}

    new = await ok(node, "PATCH", f"/v1/crystals/{mine['id']}",
                   {"text": "The release train leaves every Tuesday"})
    assert new["previousId"] == mine["id"] and new["version"] == 2
    listed = await ok(node, "GET", "/v1/crystals", namespace="user:jonas")
    assert [c["id"] for c in listed["crystals"]] == [new["id"]]
    history = await ok(node, "GET", f"/v1/crystals/{mine['id']}/history")
    assert [v["id"] for v in history["versions"]] == [mine["id"], new["id"]]
    assert (await ok(node, "GET", "/v1/namespaces"))["namespaces"] == [
        {"namespace": "agent:planner", "memories": 1}, {"namespace": "user:jonas", "memories": 1}]

    deleted = await ok(node, "DELETE", f"/v1/crystals/{new['id']}")
    assert deleted["versions"] == 2
    assert (await call(node, "GET", f"/v1/crystals/{new['id']}")).status_code == 404
    assert (await call(node, "DELETE", f"/v1/crystals/{new['id']}")).status_code == 404
    assert (await ok(node, "GET", "/v1/crystals", namespace="user:jonas"))["crystals"] == []
    assert (await ok(node, "GET", f"/v1/crystals/{theirs['id']}"))["text"] == text


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/crystals", {"text": "x", "namespace": "User:Jonas"}),
    ("POST", "/v1/crystals", {"text": "x", "namespace": "user:../../etc"}),
    ("POST", "/v1/crystals", {"text": "x", "namespace": ["default"]}),
    ("POST", "/v1/crystals", {"text": "---\nname: ../evil\ndescription: x\n---\nbody", "type": "skill"}),
    ("POST", "/v1/crystals/search", {"query": "x", "namespace": "a" * 200}),
    ("PATCH", "/v1/crystals/{id}", {"text": "changed", "namespace": "user:other"}),
    ("PATCH", "/v1/crystals/{id}", {"scope": "everyone"}),
    ("PATCH", "/v1/crystals/{id}", {"text": ""}),
    ("PATCH", "/v1/crystals/{id}", {}),
    ("PATCH", "/v1/crystals/no-such-memory", {"text": "changed"}),
    ("DELETE", "/v1/crystals/no-such-memory", None),
    ("GET", "/v1/crystals/no-such-memory/history", None),
    ("GET", "/v1/crystals?namespace=%2F..%2F", None),
])
async def test_hostile_record_requests_change_nothing(node: NodeService, method: str, path: str,
                                                      body: Any) -> None:
    kept = await ok(node, "POST", "/v1/crystals", {"text": "Keep me exactly as I am"})
    before = await ok(node, "GET", "/v1/memory/status")
    response = await call(node, method, path.replace("{id}", kept["id"]), body)
    assert 400 <= response.status_code < 500, response.text
    assert "Traceback" not in response.text and response.json()["error"]
    assert await ok(node, "GET", "/v1/memory/status") == before
    assert (await ok(node, "GET", f"/v1/crystals/{kept['id']}/history"))["versions"][0]["validTo"] is None


@pytest.mark.parametrize("column, value", [
    ("governance_json", "[]"),  # valid JSON of the wrong shape, crafted on disk
    ("provenance_json", "7"),
    ("hormonal_json", "{not json"),
    ("lifecycle", "everything"),  # not a lifecycle
])
async def test_a_crafted_row_is_left_out_of_lists_and_named_when_asked_for(
    node: NodeService, column: str, value: str
) -> None:
    kept = await ok(node, "POST", "/v1/crystals", {"text": "the ferry leaves at nine"})
    broken = await ok(node, "POST", "/v1/crystals", {"text": "the ferry to the islands is cancelled"})
    store = node.memory._memory.store

    def craft() -> None:
        with store.db.transaction() as conn:
            conn.execute(f"UPDATE crystals SET {column}=? WHERE id=?", (value, broken["id"]))

    await node.memory.run(craft)
    listed = await ok(node, "GET", "/v1/crystals")
    assert [c["id"] for c in listed["crystals"]] == [kept["id"]]
    asked = await call(node, "GET", f"/v1/crystals/{broken['id']}")
    assert asked.status_code == 500 and asked.json()["code"] == "crystal_unreadable", asked.text
    history = await ok(node, "GET", f"/v1/crystals/{broken['id']}/history")
    assert history["versions"] == []
    deleted = await ok(node, "DELETE", f"/v1/crystals/{broken['id']}")  # and it can be removed
    assert deleted["versions"] == 1
    assert (await ok(node, "GET", f"/v1/crystals/{kept['id']}"))["text"] == "the ferry leaves at nine"


async def test_a_skill_may_hold_a_market_bundle_over_the_api(node: NodeService) -> None:
    """Issue 39: POST /v1/crystals takes a skill of ~190 KiB (the client `skill add` uses); a fact of
    65,537 characters and a skill of 192 KiB + 1 are refused with the limit, and nothing is stored."""
    from protocol.skill_bundle import MAX_BUNDLE_BYTES, build

    resources = {f"references/part-{index}.md": f"step {index}: check the replica lag\n" * 2100 for index in range(3)}
    bundle = build("---\nname: big-runbook\ndescription: A large runbook.\n---\nRead the references.",
                   resources).encode()
    assert 180 * 1024 < len(bundle) <= MAX_BUNDLE_BYTES
    skill = await ok(node, "POST", "/v1/crystals", {"text": bundle, "type": "skill"})
    assert skill["outcome"] == "created" and skill["semanticType"] == "skill"
    fact = await call(node, "POST", "/v1/crystals", {"text": "y" * 65_537, "type": "fact"}, None)
    assert fact.status_code == 400 and "only a skill may hold more" in fact.text
    over = await call(node, "POST", "/v1/crystals", {"text": "x" * (MAX_BUNDLE_BYTES + 1), "type": "skill"}, None)
    assert over.status_code in (400, 422) and "196608" in over.text
    listed = await ok(node, "GET", "/v1/crystals", types="skill")
    assert [crystal["id"] for crystal in listed["crystals"]] == [skill["id"]]


async def test_a_note_and_a_budgeted_context_take_the_memory_text_limit(node: NodeService) -> None:
    """The working-memory routes hold text to the memory's one limit (``MAX_TEXT_CHARS``):
    a note of 65,537 characters, and a context request carrying that much working memory, are
    refused before anything is stored."""
    from node.memory import MAX_TEXT_CHARS

    assert MAX_TEXT_CHARS == 65_536
    note = await call(node, "POST", "/v1/memory/notes", {"text": "n" * (MAX_TEXT_CHARS + 1)}, None)
    assert note.status_code == 400 and "65536" in note.text, note.text
    ended = await call(node, "POST", "/v1/memory/context/budget",
                       {"query": "ferry", "budget_tokens": 100, "working_memory": "w" * (MAX_TEXT_CHARS + 1)}, None)
    assert ended.status_code == 400 and "65536" in ended.text, ended.text
    listed = await ok(node, "GET", "/v1/crystals")
    assert listed["crystals"] == []
