"""Every encoder of memory and its weights: text in, unit-length vectors out.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.embedding.embedder import EMBEDDER_NAMES as EMBEDDER_NAMES
    from node.memory.embedding.embedder import MAX_WINDOWS as MAX_WINDOWS
    from node.memory.embedding.embedder import Embedder as Embedder
    from node.memory.embedding.embedder import build_default_model as build_default_model
    from node.memory.embedding.embedder import embed_windows as embed_windows
    from node.memory.embedding.embedder import get_embedder as get_embedder
    from node.memory.embedding.embedder_onnx import ModelFilesMissing as ModelFilesMissing

__getattr__ = face(__name__)
