"""What ``crystalmesh mcp`` offers as MCP resources: working memory and the agent's skills.

- ``crystalmesh://working/default/MEMORY.md`` and ``.../notes.md``: MEMORY.md as the last
  dream wrote it and the scratch notes not yet folded into it (a resource template,
  ``crystalmesh://working/{namespace}/...``, serves other namespaces).
- Skills in the shape of the MCP Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``):
  every file of every skill memory is a resource ``skill://<skill-path>/<file>``, where the
  skill path is the skill's name for the agent's own skills and ``bought/<name>`` for skills
  bought on the market (a name used twice gets the crystal id as a prefix segment, so every
  URI names one skill). ``skills/list`` and ``skills/get`` answer each skill's entry:
  its front matter, and every file with its ``sha256:`` digest and size; ``skill://index.json``
  carries the same entries for clients that only read resources.

A bought skill is served as ``crystalmesh skill install`` writes it: with the provenance
line (seller, payment tx, content hash) and without the seller's ``allowed-tools`` grant.
Nothing here is cached: each list or read asks the node, so a skill recorded, bought or
withdrawn a moment ago shows at once. The resources are read-only views; the node stays
the only writer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import yaml
from mcp.server.extension import Extension, MethodBinding
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    PaginatedRequestParams,
    RequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types import Resource as MCPResource
from pydantic import AnyUrl

from node.agent.mcp_subscriptions import ResourceWatch
from node.agent.skill_install import bundle_for, installed_skill_md, source_from_crystal
from node.api import ApiClient, shapes
from node.errors import CrystalmeshError
from protocol.schema import InvalidMessage
from protocol.skill_bundle import SKILL_MD, parse_front_matter, split_front_matter

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SKILL_SCHEME = "skill://"
INDEX_URI = "skill://index.json"
WORKING_PREFIX = "crystalmesh://working/"
MAX_SKILLS = 200  # the node's memory_list limit: an agent with more lists the newest
LIST_TTL_MS = 10_000  # skills change when the agent records, buys or crystallizes
_META = "io.crystalmesh/"
_MIME = {".md": "text/markdown", ".json": "application/json", ".py": "text/x-python",
         ".sh": "text/x-shellscript", ".txt": "text/plain", ".yaml": "application/yaml",
         ".yml": "application/yaml"}


def mime_type(path: str) -> str:
    suffix = path[path.rfind("."):].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return _MIME.get(suffix, "text/plain")


@dataclass(frozen=True)
class ServedSkill:
    """One skill as the agent sees it: its path under ``skill://`` and its files' text."""

    path: str
    front_matter: dict[str, Any]
    files: dict[str, str]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"{SKILL_SCHEME}{self.path}/{SKILL_MD}"

    def file_uri(self, file_path: str) -> str:
        return f"{SKILL_SCHEME}{self.path}/{file_path}"

    def entry(self) -> dict[str, Any]:
        """The SEP-2640 ``Skill`` entry: front matter and every file's digest and size."""
        resources = []
        for file_path, text in self.files.items():
            data = text.encode("utf-8")
            resources.append({"uri": self.file_uri(file_path), "size": len(data),
                              "digest": "sha256:" + hashlib.sha256(data).hexdigest()})
        return {"uri": self.uri, "frontmatter": self.front_matter, "resources": resources,
                "_meta": self.meta}


def serve_skill(crystal: shapes.Crystal, taken: set[str]) -> ServedSkill | None:
    """A skill memory as served files, or None if it cannot be one (not a valid bundle)."""
    try:
        source = source_from_crystal(crystal)
        bundle = bundle_for(source)
        bought = source.seller != "local"
        skill_md = installed_skill_md(bundle, source, keep_allowed_tools=not bought) if bought \
            else bundle.skill_md
        front = parse_front_matter(split_front_matter(skill_md)[0])  # no anchors, aliases, tags
    except (CrystalmeshError, InvalidMessage, yaml.YAMLError, KeyError, TypeError, ValueError):
        return None  # a stranger's text: one skill that cannot be served must not hide the others
    if not isinstance(front, dict):
        return None
    prefix = "bought/" if bought else ""
    path = f"{prefix}{bundle.name}"
    if path in taken:
        path = f"{prefix}{crystal['id']}/{bundle.name}"
    taken.add(path)
    meta: dict[str, Any] = {_META + "origin": "bought" if bought else "own", _META + "crystalId": crystal["id"],
            _META + "executions": crystal.get("executions"), _META + "successes": crystal.get("successes")}
    if bought:
        meta |= {_META + "seller": source.seller, _META + "txHash": source.tx_hash,
                 _META + "listingId": source.listing_id, _META + "contentHash": source.content_hash}
    files = {SKILL_MD: skill_md} | dict(bundle.resources)
    return ServedSkill(path, front, files, meta)


def skills_of(client: ApiClient) -> list[ServedSkill]:
    """Every current skill memory of the default namespace, own ones first, newest first."""
    crystals = client.memory_list("default", ("skill",), MAX_SKILLS)
    crystals.sort(key=lambda crystal: bool((crystal.get("governance") or {}).get("peerOrigin")))
    taken: set[str] = set()
    served = (serve_skill(crystal, taken) for crystal in crystals)
    return [skill for skill in served if skill is not None]


class GetSkillParams(RequestParams):
    """``skills/get`` params: the URI of a skill's SKILL.md."""

    uri: str


class SkillsExtension(Extension):
    """SEP-2640's two required methods over :func:`skills_of`."""

    identifier = SKILLS_EXTENSION

    def __init__(self, skills: Callable[[], Awaitable[list[ServedSkill]]]) -> None:
        self._skills = skills

    def methods(self) -> Sequence[MethodBinding]:
        async def list_skills(ctx: Any, params: PaginatedRequestParams | None) -> dict[str, Any]:
            skills = await self._skills()
            return {"resultType": "complete", "skills": [skill.entry() for skill in skills],
                    "ttlMs": LIST_TTL_MS, "cacheScope": "private"}

        async def get_skill(ctx: Any, params: GetSkillParams) -> dict[str, Any]:
            skill = next((s for s in await self._skills() if s.uri == params.uri), None)
            if skill is None:
                raise MCPError(code=INVALID_PARAMS, message=f"no skill at {params.uri}",
                               data={"uri": params.uri})
            return {"resultType": "complete", "skill": skill.entry(), "ttlMs": LIST_TTL_MS,
                    "cacheScope": "private"}

        return (MethodBinding("skills/list", PaginatedRequestParams, list_skills),
                MethodBinding("skills/get", GetSkillParams, get_skill))


class AgentMcpServer(MCPServer[Any]):
    """An MCPServer whose resource list also holds the skill files the node has right now, and
    whose working-memory and skill resources can be subscribed to (``mcp_subscriptions``)."""

    def __init__(self, call: Call, **kwargs: Any) -> None:
        self._call = call
        bus = InMemorySubscriptionBus()
        self.watch = ResourceWatch(call, bus)

        @asynccontextmanager
        async def watching(_server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
            async with anyio.create_task_group() as group:
                group.start_soon(self.watch.run)
                yield {}
                group.cancel_scope.cancel()

        super().__init__(extensions=[SkillsExtension(self.skills)], subscriptions=bus, lifespan=watching,
                         middleware=[self.watch.listen_middleware], **kwargs)
        # resources/subscribe is a 2025-era spec method: the SDK serves it only through its
        # low-level server (MethodBinding refuses spec methods), which MCPServer keeps private.
        lowlevel = self._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self.watch.subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self.watch.unsubscribe)

    async def skills(self) -> list[ServedSkill]:
        served: list[ServedSkill] = await self._call(skills_of)
        return served

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        for skill in await self.skills():
            for file_path in skill.files:
                is_skill_md = file_path == SKILL_MD
                listed.append(MCPResource(
                    uri=skill.file_uri(file_path),
                    name=str(skill.front_matter.get("name", "")) if is_skill_md else file_path,
                    description=str(skill.front_matter.get("description", "")) if is_skill_md else None,
                    mime_type=mime_type(file_path)))
        return listed

    async def read_resource(self, uri: AnyUrl | str, context: Any = None) -> Any:
        text = str(uri)
        if not text.startswith(SKILL_SCHEME) or text == INDEX_URI:
            return await super().read_resource(uri, context)
        for skill in await self.skills():
            prefix = f"{SKILL_SCHEME}{skill.path}/"
            if text.startswith(prefix) and text[len(prefix):] in skill.files:
                file_path = text[len(prefix):]
                return [ReadResourceContents(content=skill.files[file_path], mime_type=mime_type(file_path))]
        raise ResourceNotFoundError(f"no skill file at {text}")


def _working_namespace(namespace: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9._@-]{1,64})?", namespace):
        raise ResourceError(f"not a namespace: {namespace!r}")
    return namespace


def _notes_markdown(state: dict[str, Any]) -> str:
    notes = state.get("notes") or []
    if not notes:
        return "_No pending notes: everything noted so far is in MEMORY.md._\n"
    return "".join(f"- [{note.get('importance', 0):.2f}] {note.get('text', '')}\n" for note in notes)


def register_resources(server: AgentMcpServer, call: Call) -> None:
    async def state(namespace: str) -> dict[str, Any]:
        result: dict[str, Any] = await call(lambda client: client.working_state(namespace))
        return result

    @server.resource(f"{WORKING_PREFIX}default/MEMORY.md", name="MEMORY.md", mime_type="text/markdown",
                     description="The agent's working memory (seed 001): who the user is, what is going "
                                 "on, pointers to older topics. Rewritten by each dream.")
    async def memory_md() -> str:
        return str((await state("default")).get("memory_md") or "")

    @server.resource(f"{WORKING_PREFIX}default/notes.md", name="pending notes", mime_type="text/markdown",
                     description="Scratch notes not yet folded into MEMORY.md, with their importance.")
    async def pending_notes() -> str:
        return _notes_markdown(await state("default"))

    @server.resource(WORKING_PREFIX + "{namespace}/MEMORY.md", name="MEMORY.md of a namespace",
                     mime_type="text/markdown")
    async def namespace_memory_md(namespace: str) -> str:
        return str((await state(_working_namespace(namespace))).get("memory_md") or "")

    @server.resource(WORKING_PREFIX + "{namespace}/notes.md", name="pending notes of a namespace",
                     mime_type="text/markdown")
    async def namespace_notes(namespace: str) -> str:
        return _notes_markdown(await state(_working_namespace(namespace)))

    @server.resource(INDEX_URI, name="skill index", mime_type="application/json",
                     description="Every skill of this agent (own and bought) with its files' sha256 "
                                 "digests and sizes (the SEP-2640 entries of skills/list).")
    async def skill_index() -> str:
        return json.dumps({"skills": [skill.entry() for skill in await server.skills()]}, indent=1)
