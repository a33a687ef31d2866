"""Memory namespaces: who a memory belongs to (``default``, ``user:jonas``, ``agent:planner``, …).

Every crystal lives in exactly one namespace. Search, listing, deduplication and
consolidation merges stay inside one namespace unless a caller asks for all of
them; two agents sharing a node therefore never see each other's memories by
accident. A name is a lowercase kind, optionally followed by ``:`` and an id of
letters, digits and ``._@-`` — short, printable, and safe in a URL query, a
file name and a log line.
"""

from __future__ import annotations

import re

from node.errors import CrystalmeshError

DEFAULT_NAMESPACE = "default"
MAX_NAMESPACE_CHARS = 100
_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}(?::[A-Za-z0-9._@-]{1,64})?")


class InvalidNamespace(CrystalmeshError, ValueError):
    """A namespace name outside the allowed shape (HTTP 400, CLI exit 1)."""

    code = "invalid_namespace"


def validate_namespace(name: object, field: str = "namespace") -> str:
    """``name`` if it is a valid namespace (``None`` means the default), else InvalidNamespace."""
    if name is None:
        return DEFAULT_NAMESPACE
    if not isinstance(name, str) or len(name) > MAX_NAMESPACE_CHARS or not _PATTERN.fullmatch(name):
        shown = name[:40] if isinstance(name, str) else type(name).__name__
        raise InvalidNamespace(
            f"{field} {shown!r} is not a namespace: use a lowercase kind and an optional id, "
            "like default, user:jonas, agent:planner or session:2024-06-01"
        )
    return name


__all__ = ["DEFAULT_NAMESPACE", "InvalidNamespace", "validate_namespace"]
