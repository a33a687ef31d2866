"""``crystalmesh mcp``: the node's memory and market as MCP tools.

The tools live one module per face of the node, as the API's routes do
(``node.api.routes``): ``mcp_memory``, ``mcp_working``, ``mcp_learning``,
``mcp_market``, ``mcp_weather``; a tool sits with the face that answers it.
Trust and the operator's undo have no tools: an agent reports a bought skill's
outcome (``skill_report_outcome``, market) and the node turns it into trust evidence;
banning, lifting and releasing are the human operator's (CLI, API, dashboard).

The server is a client of the running node's local API, so the node stays the
single owner of its database; this process holds no state of its own. Errors
from the node (or an unreachable node) become MCP tool errors carrying the
node's one-line message, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from node.agent.mcp_learning import register_learning_tools
from node.agent.mcp_market import register_market_tools
from node.agent.mcp_memory import register_memory_tools
from node.agent.mcp_progress import HEARTBEAT_S
from node.agent.mcp_resources import AgentMcpServer, register_resources
from node.agent.mcp_scan import register_scan_tools
from node.agent.mcp_weather import register_weather_tools
from node.agent.mcp_working import register_working_tools
from node.api import ApiClient, ApiError

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
    register_memory_tools(server, call)  # store, search, read, change and forget; conversations
    register_working_tools(server, call, heartbeat_s)  # seed 001: memory_context, memory_dream, crystallize
    register_learning_tools(server, call)  # seed 003/004: feedback, session end, context under a budget
    register_market_tools(server, call, heartbeat_s)  # search, buy, install, publish; the skill loop
    register_weather_tools(server, call)
    register_scan_tools(server)  # skill_scan: a local skill, with the agent's own model as judge
    register_resources(server, call)  # MEMORY.md, pending notes, skill:// files (SEP-2640)
    return server
