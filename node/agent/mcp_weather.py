"""MCP tools of cortisol weather: whether a management alert restricts whose skills are accepted.

Registered by :func:`node.agent.mcp_server.build_server`. Broadcasting and lifting an
alert are a management operator's acts (CLI and API), not an agent's.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from node.agent.mcp_common import Call, offer


class WeatherTools:
    """Cortisol weather's tools, one method each (signature and docstring are what an agent sees)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def weather_status(self) -> dict[str, Any]:
        """The network's 'cortisol weather': whether a management alert currently restricts which
        peers' skills are accepted."""
        return await self.call(lambda client: client.weather())


def register_weather_tools(server: MCPServer[Any], call: Call) -> None:
    offer(server, WeatherTools(call))
