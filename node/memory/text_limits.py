"""How much text a memory may hold: a skill a whole market bundle, anything else a statement.

Its own module because both the request parsers (``requests``, ``versions``) and the
operations the facade calls (``skill_versions``, the working-memory backend) check it,
and the facade imports those: the rule lives below all of them.
"""

from __future__ import annotations

from node.crystals import SemanticType
from node.memory.search import MemoryInputError
from protocol.skill_bundle import MAX_BUNDLE_BYTES

MAX_TEXT_CHARS = 65_536
# A skill is sold whole, as one Delivery (docs/protocol.md 4.5): its text may be as large as a
# market bundle, 192 KiB of UTF-8, so published skills with scripts and references fit. Every
# other memory keeps MAX_TEXT_CHARS (a statement, not a folder); the embedder reads the first
# windows of any text (node/memory/embedding), so the larger skill costs no more to index.
MAX_SKILL_TEXT_BYTES = MAX_BUNDLE_BYTES
KNOWLEDGE_TYPES = (SemanticType.SKILL, SemanticType.TASK_PATTERN)


def check_text_size(text: str, semantic_type: SemanticType) -> str:
    """``text`` if its type may hold it: a skill up to ``MAX_SKILL_TEXT_BYTES`` of UTF-8,
    any other memory up to ``MAX_TEXT_CHARS`` characters."""
    if semantic_type in KNOWLEDGE_TYPES:
        if len(text) > MAX_SKILL_TEXT_BYTES or len(text.encode("utf-8", "replace")) > MAX_SKILL_TEXT_BYTES:
            raise MemoryInputError(f"a skill's text is larger than {MAX_SKILL_TEXT_BYTES} bytes (UTF-8): "
                                   "move large references out of the skill or link to them")
    elif len(text) > MAX_TEXT_CHARS:
        raise MemoryInputError(f"text is longer than {MAX_TEXT_CHARS} characters"
                               + (" (only a skill may hold more)" if len(text) <= MAX_SKILL_TEXT_BYTES else ""))
    return text


__all__ = ["KNOWLEDGE_TYPES", "MAX_SKILL_TEXT_BYTES", "MAX_TEXT_CHARS", "check_text_size"]
