"""The local HTTP API (FastAPI over per-concept interfaces) and its client.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.api import shapes as shapes
    from node.api.client import ApiClient as ApiClient
    from node.api.client import ApiError as ApiError
    from node.api.client import add_body as add_body
    from node.api.client import pid_alive as pid_alive
    from node.api.client import running_node as running_node
    from node.api.client import skill_body as skill_body
    from node.api.client import update_body as update_body
    from node.api.models import SearchIn as SearchIn
    from node.api.routes import build_app as build_app

__getattr__ = face(__name__)
