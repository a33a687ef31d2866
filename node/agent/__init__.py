"""The agent-facing side of a node: the MCP server and skill installation."""
