"""``crystalmesh mcp``: the node's memory and market as MCP tools.

The server is a client of the running node's local API, so the node stays the
single owner of its database; this process holds no state of its own. Errors
from the node (or an unreachable node) become MCP tool errors carrying the
node's one-line message, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.agent.mcp_conversations import register_conversation_tools
from node.agent.mcp_learning import register_learning_tools
from node.agent.mcp_market import (
    MICRO_PER_USDC,
    PURCHASE_STEPS,
    purchase_step,
    purchases_of,
    register_market_tools,
    usdc_to_micro,
)
from node.agent.mcp_progress import HEARTBEAT_S, Progress
from node.agent.mcp_resources import AgentMcpServer, register_resources
from node.agent.mcp_working import (
    DEFAULT_NOTE_IMPORTANCE,
    Importance,
    add_working_note,
    as_working_note,
    register_working_tools,
)
from node.agent.skill_install import install, source_from_node
from node.api import ApiClient, ApiError
from node.errors import CrystalmeshError
from protocol.schema import InvalidMessage

T = TypeVar("T")

INSTRUCTIONS = """\
Long-term memory and a skill marketplace for this agent, served by a local crystalmesh node.
Search memory before answering questions about past work; add what is worth remembering
(decisions, facts about the user, outcomes of tasks); store an instruction or preference the
user states as type "directive" (it never fades and wins over what you inferred); when a fact
changes, memory_update it (the old version stays in memory_history) rather than adding a
contradiction; memory_delete what is wrong or asked to be forgotten. Memories live in namespaces (default "default"; e.g.
"user:<name>", "agent:<role>", "session:<id>"): pass the same namespace to add, search and list
to keep users, agents and sessions apart. Skills bought on the market cost real USDC: check
the price with market_search first; skill_buy never pays more than max_price_usdc and the
node's own daily spend cap; skill_install writes a bought skill as <dir>/<name>/SKILL.md.
The skill loop: skill_crystallize an emerging skill from MEMORY.md, skill_record_execution
after each run of your own skill (3 runs with >= 60 % success make it listable), skill_publish,
listing_reprice or listing_unpublish it; bounty_post what you cannot find. After running a
skill you bought, skill_report_outcome (a bad one lowers the seller's trust). Resources:
crystalmesh://working/default/MEMORY.md and .../notes.md, and every skill as
skill://<name>/SKILL.md (bought ones under skill://bought/), listed with digests by
skills/list and skill://index.json; subscribe to MEMORY.md, notes.md or skill://index.json to hear
when they change."""

MemoryType = Literal[
    "general", "fact", "preference", "episode", "insight", "relationship", "goal",
    "skill", "task_pattern", "warning", "directive",
]
Scope = Literal["private", "confidential", "shared", "public"]
SourceName = Literal["memory", "sessions", "files", "skills"]  # node.crystals.Source
Sources = Annotated[list[SourceName] | None, Field(description=(
    'Only memories from these sources: "memory" (what was stored or noted), "sessions" (transcripts and '
    'conversations), "files" (indexed files), "skills". Default: all.'))]
Namespace = Annotated[str, Field(
    min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9._@-]{1,64})?$",
    description='Whose memory: "default", "user:<name>", "agent:<role>", "session:<id>", ...')]
MemoryId = Annotated[str, Field(min_length=1, max_length=64,
                                description="A memory id from memory_search, memory_add or memory_list.")]


def build_server(connect: Callable[[], ApiClient], *, heartbeat_s: float = HEARTBEAT_S) -> MCPServer[Any]:
    """The MCP server; ``connect`` returns a client for the running node (raises ApiError).
    ``heartbeat_s``: how often a long tool call reports that it is still waiting."""
    async def call(operation: Callable[[ApiClient], T]) -> T:
        """``operation`` on a fresh client of the node, off the event loop; node errors as tool errors."""

        def blocking() -> T:
            client = connect()
            try:
                return operation(client)
            finally:
                client.close()

        try:
            return await anyio.to_thread.run_sync(blocking)
        except ApiError as exc:
            raise ToolError(str(exc)) from exc

    server = AgentMcpServer(call, name="crystalmesh", instructions=INSTRUCTIONS)
    register_learning_tools(server, call)
    register_conversation_tools(server, call)
    register_market_tools(server, call)  # the skill loop: record, crystallize, bounties, reprice, report
    register_resources(server, call)  # MEMORY.md, pending notes, skill:// files (SEP-2640)

    @server.tool()
    async def memory_search(
        query: Annotated[str, Field(min_length=1, description="What to look for, in plain words or exact identifiers.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 10,
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
        namespace: Namespace = "default",
        all_namespaces: Annotated[bool, Field(description="Search every namespace, not just `namespace`.")] = False,
        min_relevance: Annotated[float, Field(ge=0.0, le=1.0, description=(
            "Leave out hits whose relevance (a calibrated probability that the hit is relevant) is below "
            "this; no hit left means memory holds nothing relevant."))] = 0.0,
        source: Sources = None,
    ) -> dict[str, Any]:
        """Search the agent's long-term memory (hybrid: meaning + exact words) in one namespace.
        Returns the best matching current memories with id, text, type, namespace, score,
        relevance (0-1, calibrated) and origin: where each came from (a session's id, turn and
        time; a file's path and lines; a skill's id; or a stored memory)."""
        hits = await call(lambda client: client.memory_search(
            query, k, types=types or [], namespace=namespace, all_namespaces=all_namespaces,
            min_relevance=min_relevance, sources=source or ()))
        return {"hits": [_hit(hit) for hit in hits]}

    @server.tool()
    async def memory_add(
        text: Annotated[str, Field(min_length=1, max_length=65536, description="The memory, one self-contained statement.")],
        type: Annotated[MemoryType, Field(description=(
            'Kind of memory. "directive": an instruction or preference the user stated '
            "(it never fades and outranks inferred memories that contradict it)."))] = "general",
        scope: Annotated[Scope | None, Field(description="Who may see it; secrets are always kept confidential.")] = None,
        namespace: Namespace = "default",
        ttl_seconds: Annotated[int | None, Field(ge=1, le=315_360_000, description="Forget it after this many seconds.")] = None,
        importance: Importance | None = None,
        permanent: Annotated[bool, Field(description=(
            "Pin it: never forgotten by decay, only when deleted."))] = False,
    ) -> dict[str, Any]:
        """Store a memory in a namespace. Returns its id and the outcome: "created", or "exists"
        when this namespace already holds exactly this text (then nothing changed; use
        memory_update to change its scope). This is also the working-memory note: names,
        preferences, decisions, deadlines are kept in the scratch notes until the next dream
        folds them into MEMORY.md (see memory_context), and never fade below their importance
        (default 0.7)."""
        body: dict[str, Any] = {"text": text, "type": type, "namespace": namespace}
        if scope is not None:
            body["scope"] = scope
        if ttl_seconds is not None:
            body["ttl_ms"] = ttl_seconds * 1000
        if permanent:
            body["lifespan"] = "permanent"
        if as_working_note(body):  # seed 001's working_memory_note (docs/memory.md)
            return await add_working_note(call, body, DEFAULT_NOTE_IMPORTANCE if importance is None else importance)
        crystal = await call(lambda client: client.memory_add(
            text, semantic_type=type, scope=scope, ttl_ms=body.get("ttl_ms"), namespace=namespace,
            importance=importance, lifespan=body.get("lifespan")))
        return {"id": crystal["id"], "outcome": crystal.get("outcome", "created"),
                "namespace": crystal.get("namespace"), "type": crystal.get("semanticType"),
                "scope": _scope(crystal)} | ({"differs": crystal["differs"]} if crystal.get("differs") else {})

    @server.tool()
    async def memory_get(id: MemoryId) -> dict[str, Any]:
        """Read one memory (any version) with its audit trail."""
        segment = _path_segment(id)
        crystal = await call(lambda client: client.memory_get(segment))
        return _memory(crystal) | {"lifecycle": crystal.get("lifecycle"), "audit": crystal.get("audit", [])}

    @server.tool()
    async def memory_list(
        namespace: Namespace = "default",
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> dict[str, Any]:
        """The newest current memories of a namespace (deleted, expired and superseded ones are not listed)."""
        crystals = await call(lambda client: client.memory_list(namespace, types or (), limit))
        return {"memories": [_memory(crystal) for crystal in crystals]}

    @server.tool()
    async def memory_update(
        id: MemoryId,
        text: Annotated[str | None, Field(min_length=1, max_length=65536, description="The corrected memory.")] = None,
        scope: Annotated[Scope | None, Field(description="A new access scope.")] = None,
    ) -> dict[str, Any]:
        """Change a memory: writes a new version (new id) and closes the old one, which stays
        readable through memory_history. Give the new text, a new scope, or both."""
        if text is None and scope is None:
            raise ToolError("memory_update needs text or scope")
        segment = _path_segment(id)
        crystal = await call(lambda client: client.memory_update(segment, text, scope))
        return _memory(crystal) | {"previous_id": crystal.get("previousId")}

    @server.tool()
    async def memory_delete(id: MemoryId) -> dict[str, Any]:
        """Forget a memory (every version): it disappears from search, get and lists at once and is
        physically removed by the next consolidation; the deletion stays in memory_history."""
        segment = _path_segment(id)
        return await call(lambda client: client.memory_delete(segment))

    @server.tool()
    async def memory_history(id: MemoryId) -> dict[str, Any]:
        """Every version of a memory (oldest first, with valid_from/valid_to) and every transition
        (created, updated, deleted, lifecycle changes), for any version's id."""
        segment = _path_segment(id)
        result = await call(lambda client: client.memory_history(segment))
        return {"memory_id": result.get("memory_id"), "namespace": result.get("namespace"),
                "deleted": result.get("deleted", False),
                "versions": [_memory(crystal) for crystal in result.get("versions", [])],
                "transitions": result.get("transitions", [])}

    @server.tool()
    async def market_search(
        query: Annotated[str, Field(min_length=1, description="The skill you need, in plain words.")],
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        max_price_usdc: Annotated[float | None, Field(ge=0, description="Only skills at or below this price.")] = None,
    ) -> dict[str, Any]:
        """Search skills other nodes sell, by meaning. Prices are in USDC (and micro-USDC)."""
        max_price = None if max_price_usdc is None else usdc_to_micro(max_price_usdc)
        listings = await call(lambda client: client.search_listings(query, k, max_price_micro_usdc=max_price))
        return {"listings": [_listing(listing) for listing in listings]}

    @server.tool()
    async def skill_buy(
        ctx: Context[Any, Any],
        listing_id: Annotated[str, Field(min_length=1, description="listing_id from market_search.")],
        max_price_usdc: Annotated[float, Field(ge=0, description="Refuse to pay more than this (USDC).")],
    ) -> dict[str, Any]:
        """Buy a skill with USDC and store it in memory. COSTS USDC: pays the listing's price, at
        most max_price_usdc and never beyond the node's spend caps. Returns the price actually
        paid, "scheme" (how it was paid: "batch-settlement" = a voucher from a deposit held for
        that seller, "exact" = one on-chain transfer) and the stored skill's id. The FIRST
        purchase from a seller that takes vouchers also deposits [market]
        channel_deposit_micro_usdc (default 1 USDC, at least the price) into a refundable channel
        ("deposit_usdc" in the result; see wallet_channels). After running it, call
        skill_report_outcome.
        Every bought skill is scanned first: "quarantined": true means it was NOT stored (its
        "scan" findings say why; only the operator can release it) and the seller was charged.
        Reports progress (terms, payment, delivery, verification, ingest) to a client that asks."""
        max_price = usdc_to_micro(max_price_usdc)
        progress = Progress(ctx, total=len(PURCHASE_STEPS), heartbeat_s=heartbeat_s)
        await progress.step(0, PURCHASE_STEPS[0])
        earlier = {row.get("request_id") for row in await call(lambda client: purchases_of(client, listing_id))}

        async def observe() -> tuple[float, str] | None:
            rows = await call(lambda client: purchases_of(client, listing_id))
            state = next((row.get("state") for row in rows if row.get("request_id") not in earlier), None)
            return purchase_step(state)

        result = await progress.during(lambda: call(lambda client: client.buy(listing_id, max_price)),
                                       PURCHASE_STEPS[0], observe)
        await progress.step(len(PURCHASE_STEPS), "quarantined: paid, not stored" if result.get("quarantined")
                            else "stored in memory")
        paid = result.get("price_micro_usdc")
        deposit = result.get("deposit_micro_usdc")
        return (result | ({"price_usdc": paid / MICRO_PER_USDC} if isinstance(paid, int) else {})
                | ({"deposit_usdc": deposit / MICRO_PER_USDC} if isinstance(deposit, int) else {})
                | {"scheme": result.get("scheme", "exact")})

    @server.tool()
    async def skill_publish(
        crystal_id: Annotated[str, Field(min_length=1, description="Id of a skill memory with a track record.")],
    ) -> dict[str, Any]:
        """List one of the agent's proven skills on the market (needs >= 3 recorded executions
        and >= 60 % success, see skill_record_execution). Costs no USDC: one signed gossip
        message. The price comes from the node's pricing engine (change it: listing_reprice)."""
        segment = _path_segment(crystal_id)
        return await call(lambda client: client.publish_skill(segment))

    @server.tool()
    async def skill_publish_catalogue(
        ctx: Context[Any, Any],
        crystal_ids: Annotated[list[str] | None, Field(
            description="Ids of skill memories to list; omit to list every listable skill "
                        "this node never listed.")] = None,
    ) -> dict[str, Any]:
        """List many of the agent's proven skills at once (a catalogue), carried in signed
        batches so the network's rate limit is no obstacle. Returns the listings made and the
        skills that could not be listed, with the reason. Reports progress after each batch
        to a client that asks for it."""
        ids = [_path_segment(crystal_id) for crystal_id in crystal_ids] if crystal_ids is not None else None
        progress = Progress(ctx, total=len(ids) if ids is not None else None, heartbeat_s=heartbeat_s)
        await progress.step(0, "publishing the catalogue")
        report = progress.from_worker()

        def batch_done(published: int, failed: int, remaining: int) -> None:
            report(published + failed, published + failed + remaining)

        return await progress.during(lambda: call(lambda client: client.publish_catalogue(ids, batch_done)),
                                     "publishing the catalogue")

    @server.tool()
    async def skill_install(
        skill: Annotated[str, Field(min_length=1, max_length=128,
                                    description="listing_id of a bought skill, or a skill memory's id.")],
        to_dir: Annotated[str, Field(min_length=1, description="Absolute path of the agent's skills folder.")],
        force: Annotated[bool, Field(description="Replace an installed skill of the same name.")] = False,
    ) -> dict[str, Any]:
        """Install a skill as an Agent Skill: writes <to_dir>/<name>/SKILL.md (with a provenance
        line naming seller, payment tx and content hash) and its resource files. A skill the scan
        quarantines is refused: only the node's operator can release or accept it."""
        if not Path(to_dir).is_absolute():
            raise ToolError("to_dir must be an absolute path")

        def blocking() -> dict[str, Any]:
            client = connect()
            try:
                return install(source_from_node(client, skill), Path(to_dir), force=force)
            finally:
                client.close()

        try:
            return await anyio.to_thread.run_sync(blocking)
        except (ApiError, CrystalmeshError, InvalidMessage, OSError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def weather_status() -> dict[str, Any]:
        """The network's 'cortisol weather': whether a management alert currently restricts which
        peers' skills are accepted."""
        return await call(lambda client: client.weather())

    @server.tool()
    async def wallet_balance() -> dict[str, Any]:
        """The node's wallet address and USDC balance, and today's spending against its cap."""
        return await call(lambda client: client.wallet())

    @server.tool()
    async def wallet_channels() -> dict[str, Any]:
        """Payment channels: per seller this node buys from, the deposit, what vouchers spent
        and what is left (refundable); per buyer paying this node, what it was charged and
        what is not yet claimed, and whether the buyer asked to withdraw."""
        return await call(lambda client: client.channels())

    register_working_tools(server, call, heartbeat_s)  # working memory (seed 001): memory_context, memory_dream
    return server


def _path_segment(value: str) -> str:
    if "/" in value or "?" in value or "#" in value or value in {".", ".."}:
        raise ToolError(f"not a valid id: {value!r}")
    return value


def _scope(crystal: dict[str, Any]) -> Any:
    governance = crystal.get("governance")
    return governance.get("accessScope") if isinstance(governance, dict) else None


def _memory(crystal: dict[str, Any]) -> dict[str, Any]:
    return {"id": crystal.get("id"), "text": crystal.get("text"), "type": crystal.get("semanticType"),
            "namespace": crystal.get("namespace"), "scope": _scope(crystal),
            "memory_id": crystal.get("memoryId"), "version": crystal.get("version"),
            "valid_from": crystal.get("validFrom"), "valid_to": crystal.get("validTo"),
            "superseded_by": crystal.get("supersededBy")}


def _hit(hit: dict[str, Any]) -> dict[str, Any]:
    crystal = hit.get("crystal", hit)
    turn = hit.get("turn") or {}  # a conversation turn: where it was said
    return {"id": crystal.get("id"), "text": crystal.get("text"), "type": crystal.get("semanticType"),
            "namespace": crystal.get("namespace"), "score": hit.get("score"), "relevance": hit.get("relevance"),
            # What the user told (directive) outranks what was inferred; bought is marked with its seller.
            "layer": crystal.get("epistemicLayer"), "provenance": crystal.get("provenance"),
            "seller": crystal.get("seller"), "origin": hit.get("origin")} | (
        {"source_id": hit.get("source_id"), "speaker": turn.get("speaker"), "session": turn.get("session"),
         "session_date": turn.get("session_date")} if turn else {})


def _listing(listing: dict[str, Any]) -> dict[str, Any]:
    price = listing.get("price_micro_usdc")
    return listing | ({"price_usdc": price / MICRO_PER_USDC} if isinstance(price, int) else {})
