"""The agent's side: the MCP server (a client of the local API) and skill install.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.agent.mcp_server import build_server as build_server
    from node.agent.skill_install import install as install
    from node.agent.skill_install import source_from_node as source_from_node

__getattr__ = face(__name__)
