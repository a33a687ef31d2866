"""Seed crystal migration: a hand-written MEMORY.md survives the switch to working memory.

Seed 001: on first activation, if migration has not run (flag in the meta
table), read the existing MEMORY.md, back it up to ``MEMORY.md.seed-backup``,
chunk it (400 tokens, 80 overlap), insert the chunks as crystals with
``importance_score`` 0.75 and lifecycle ``consolidated``, and mark the
migration complete. The first dream afterwards appends below the hand-written
text instead of rewriting it (see ``state.render_state``). The chunker is the
file index's (``node.memory.files``), in seed 001's fixed-window form.
"""

from __future__ import annotations

from node.memory.files import Chunk, chunk_markdown

SEED_IMPORTANCE = 0.75

__all__ = ["SEED_IMPORTANCE", "Chunk", "chunk_markdown"]
