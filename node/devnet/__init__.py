"""``crystalmesh devnet``: a local chain and N node processes.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.devnet import manager as manager
    from node.devnet.joining import add as add
    from node.devnet.state import load_state as load_state
    from node.devnet.state import resolve_node_dir as resolve_node_dir

__getattr__ = face(__name__)
