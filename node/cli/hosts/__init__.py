"""The commands an agent host runs or a user runs for a host: ``crystalmesh hook …`` (what the
host's hooks call: fast, never failing, never waiting) and ``crystalmesh integrate …`` (install
those hooks and the MCP server in the host's settings).

``hook_fast_path`` answers ``crystalmesh hook claude-code|codex`` before the click command tree
is imported (``node.cli.main``): a session-start hook is on the host's critical path.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.cli.hosts.fast import hook_fast_path as hook_fast_path
    from node.cli.hosts.hook import hook as hook
    from node.cli.hosts.integrate import integrate as integrate

__getattr__ = face(__name__)
