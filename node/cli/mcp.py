"""``crystalmesh mcp``: serve the running node's memory and market to an MCP host."""

from __future__ import annotations

import click

from node.api import ApiClient, ApiError
from node.cli.context import CliContext, common_options


@click.command("mcp")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio for an MCP host that starts this command; http for streamable HTTP.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port for --transport http (127.0.0.1).")
@common_options
def mcp(ctx: CliContext, transport: str, port: int) -> None:
    """Run an MCP server (tools: memory_*, market_search, skill_*, weather_status, wallet_balance)
    that talks to the node running on this data dir through its local API.

    \f
    Example (an MCP host's config): ``{"command": "crystalmesh", "args": ["--node", "node-1", "mcp"]}``
    """
    from node.agent import build_server

    def connect() -> ApiClient:
        client = ctx.running()
        if client is None:
            raise ApiError(
                f"no crystalmesh node is running on {ctx.resolve_data_dir()}; "
                "start it with `crystalmesh run` (or `crystalmesh devnet up`)"
            )
        return client

    server = build_server(connect)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)
