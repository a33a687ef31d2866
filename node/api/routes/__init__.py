"""The ``/v1`` routes, one module per face of the node (``node.api.interface.NodeApi``).

Rule: a route lives in the module of the face that answers it: ``memory``,
``working``, ``learning``, ``market``, ``trust``, ``weather``, ``operator``
(and ``status`` for the node's own status, peers and rejections). So
``POST /v1/skills/{id}/crystallize`` (working memory turns an emerging skill into a
skill crystal, seed 001) sits in ``working`` beside the notes, and ``POST
/v1/trust/ban`` (an audited act of the operator) in ``operator``. Each module
exports one ``<face>_router(node)`` that reads the face off ``node`` when a request
comes, so a test double may leave out a face whose routes it never calls.
``app`` puts them together behind the guard. Outside this package, import only
the names below (``node/face.py``; enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.api.routes.app import ApiApp as ApiApp
    from node.api.routes.app import build_app as build_app
    from node.api.routes.app import build_fastapi as build_fastapi

__getattr__ = face(__name__)
