"""Turn an untrusted "add a memory" request (API body, CLI flags) into ``Memory.add`` arguments.

Every field is checked for type and range before anything is written: a bad
value is a :class:`MemoryInputError` naming the field (HTTP 400 / CLI exit 1),
never a crystal that later breaks consolidation (issue 12, row 5: a string
``ttl_ms`` used to be stored and then failed every consolidation run).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from node.crystals import AccessScope, Crystal, LifespanPolicy, SemanticType, Source, now_ms
from node.memory.facade import ConsolidationReport, Memory, MemoryInputError
from node.memory.namespaces import validate_namespace
from node.memory.text_limits import (
    KNOWLEDGE_TYPES,
    MAX_SKILL_TEXT_BYTES,
    check_text_size,
)
from protocol.skill_bundle import decode, looks_like_bundle

MAX_TTL_MS = 10 * 365 * 86_400_000
MAX_TAGS = 16
ALLOWED_KEYS = frozenset({"text", "type", "scope", "path", "ttl_ms", "category", "tags", "namespace",
                          "importance", "lifespan"})
SETTABLE_LIFESPANS = (LifespanPolicy.DECAY, LifespanPolicy.PERMANENT)  # a TTL comes with ttl_ms


def _text(value: Any, name: str, limit: int, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise MemoryInputError(f"{name} must be a non-empty string" if required else
                               f"{name} must be a string")
    if len(value) > limit:
        raise MemoryInputError(f"{name} is longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise MemoryInputError(f"{name} is not valid Unicode text (lone surrogate)") from error
    return value


def _choice(value: Any, name: str, enum: Any) -> Any:
    if value is None:
        return None
    try:
        return enum(value)
    except (ValueError, TypeError) as error:
        allowed = ", ".join(member.value for member in enum)
        raise MemoryInputError(f"{name} must be one of: {allowed}") from error


def parse_add_request(body: Any) -> tuple[str, dict[str, Any]]:
    """Validate ``body`` completely: the text and the keyword arguments of ``Memory.prepare``."""
    if not isinstance(body, dict):
        raise MemoryInputError("the request must be a JSON object")
    unknown = sorted(set(body) - ALLOWED_KEYS)
    if unknown:
        raise MemoryInputError(f"unknown field(s): {', '.join(unknown)}")
    text = _text(body.get("text"), "text", MAX_SKILL_TEXT_BYTES, required=True)
    assert text is not None
    semantic_type = _choice(body.get("type"), "type", SemanticType) or SemanticType.GENERAL
    check_text_size(text, semantic_type)
    scope = _choice(body.get("scope"), "scope", AccessScope)
    path = _text(body.get("path"), "path", 1024)
    category = _text(body.get("category"), "category", 64)
    ttl_ms = body.get("ttl_ms")
    if ttl_ms is not None and (not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool)
                               or not 0 < ttl_ms <= MAX_TTL_MS):
        raise MemoryInputError(f"ttl_ms must be an integer between 1 and {MAX_TTL_MS} (milliseconds)")
    tags = body.get("tags") or []
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        raise MemoryInputError(f"tags must be a list of at most {MAX_TAGS} strings")
    checked_tags = [_text(tag, "tags[]", 32, required=True) for tag in tags]
    floor = parse_importance(body.get("importance"))
    lifespan = parse_lifespan(body.get("lifespan"))
    if lifespan is not None and ttl_ms:
        raise MemoryInputError("give ttl_ms or lifespan, not both (a TTL is its own lifespan)")
    extra: dict[str, Any] = {"namespace": validate_namespace(body.get("namespace")),
                             "importance_floor": floor}
    if semantic_type in KNOWLEDGE_TYPES:
        # A skill is found under the "skills" source (search --source skills), however it was added.
        extra |= {"skill_category": category, "skill_tags": checked_tags, "source": Source.SKILLS}
        if looks_like_bundle(text.strip()):
            decode(text.strip())  # a skill in SKILL.md form must be a valid, canonical bundle
    return text, dict(semantic_type=semantic_type, scope=scope, path=path, ttl_ms=ttl_ms,
                      lifespan=LifespanPolicy.TTL if ttl_ms else lifespan, **extra)


def parse_importance(value: Any) -> float | None:
    """An explicit importance (0 to 1): the memory's floor, so it never decays away."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise MemoryInputError("importance must be a number between 0 and 1")
    return round(float(value), 3)


def parse_lifespan(value: Any) -> LifespanPolicy | None:
    """``decay`` (the default: importance or energy decide) or ``permanent`` (pinned)."""
    if value is None:
        return None
    if value not in [policy.value for policy in SETTABLE_LIFESPANS]:
        raise MemoryInputError("lifespan must be one of: decay, permanent (a TTL is given with ttl_ms)")
    return LifespanPolicy(value)


def add_from_request(memory: Memory, body: Any) -> Crystal:
    """Validate ``body`` completely, then add the memory (shared by the CLI and the API)."""
    text, kwargs = parse_add_request(body)
    return memory.add(text, **kwargs)


MAX_AHEAD_MS = 10 * 365 * 86_400_000
_RELATIVE = re.compile(r"\+(?P<count>[0-9]{1,6})(?P<unit>[dh])")
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000}


def consolidation_time(value: Any, now: int) -> int:
    """When ``memory consolidate --at`` runs the cycle: ``+Nd`` / ``+Nh`` from ``now``, or an ISO
    date or time (UTC unless it names an offset). Never before ``now`` (time does not run back
    for importance or energy) and at most ten years ahead."""
    if value is None:
        return now
    if not isinstance(value, str) or len(value) > 40:
        raise MemoryInputError("at must be +Nd, +Nh or an ISO date such as 2026-03-20")
    text = value.strip()
    relative = _RELATIVE.fullmatch(text)
    if relative:
        at = now + int(relative["count"]) * _UNIT_MS[relative["unit"]]
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as error:
            raise MemoryInputError(f"at: {value!r} is neither +Nd, +Nh nor an ISO date") from error
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        at = int(moment.timestamp() * 1000)
    if at < now:
        raise MemoryInputError("at is in the past: consolidation runs now or later")
    if at - now > MAX_AHEAD_MS:
        raise MemoryInputError("at is more than ten years ahead")
    return at


def consolidate_at(memory: Memory, at: Any = None, *, purge: bool = False, dry_run: bool = False,
                   now: int | None = None) -> ConsolidationReport:
    """``memory consolidate [--at DATE|+Nd] [--dry-run] [--purge]``: one cycle as of ``at``
    (:func:`consolidation_time`), applied, or with ``dry_run`` only reported (nothing written).
    The CLI without a node, the API and the MCP server all end here."""
    if purge and dry_run:
        raise MemoryInputError("a dry run purges nothing: give --purge or --dry-run, not both")
    when = consolidation_time(at, now if now is not None else now_ms())
    return memory.consolidate(when, purge=purge, dry_run=dry_run)
