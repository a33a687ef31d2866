"""Conversations as input: a transcript file becomes one memory per turn, traceable to its file.

``read_conversation`` judges a whole file (shape, size, depth, text) before
anything is stored; ``ingest_conversation`` stores every new turn in one
transaction, each with its speaker, session, position, time and the id its
file gave it; ``attach_turns`` puts that origin on search hits and
``neighbours`` returns the turns around one; ``session_keys`` tells search
which candidates are turns of one session. Relative dates are resolved
against the session date by ``resolve_relative``.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.conversations.clean import shorten as shorten
    from node.memory.conversations.clean import strip_controls as strip_controls
    from node.memory.conversations.clean import tidy as tidy
    from node.memory.conversations.dates import resolve_relative as resolve_relative
    from node.memory.conversations.ingest import MAX_WINDOW as MAX_WINDOW
    from node.memory.conversations.ingest import TurnMemory as TurnMemory
    from node.memory.conversations.ingest import attach_turns as attach_turns
    from node.memory.conversations.ingest import embed_plan as embed_plan
    from node.memory.conversations.ingest import ingest_conversation as ingest_conversation
    from node.memory.conversations.ingest import neighbours as neighbours
    from node.memory.conversations.ingest import plan_ingest as plan_ingest
    from node.memory.conversations.ingest import session_keys as session_keys
    from node.memory.conversations.ingest import store_plan as store_plan
    from node.memory.conversations.parse import MAX_CONVERSATION_BYTES as MAX_CONVERSATION_BYTES
    from node.memory.conversations.parse import ConversationRefused as ConversationRefused
    from node.memory.conversations.parse import read_conversation as read_conversation
    from node.memory.conversations.schema import CONCEPT as CONCEPT
    from node.memory.conversations.schema import MIGRATIONS as MIGRATIONS

__getattr__ = face(__name__)
