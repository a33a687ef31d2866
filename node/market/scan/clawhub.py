"""ClawHub's layout: a SKILL.md without front matter, its name in ``_meta.json`` beside it.

ClawHub (the OpenClaw skill registry) publishes a skill as ``SKILL.md`` plus a
``_meta.json`` of the registry's own (``owner``, ``slug``, ``displayName``,
``latest.version``); many of those SKILL.md files have no YAML front matter, so
they are not Agent Skills bundles as written (about 4 % of 3,175 public skills,
docs/skills-safety.md "Do real skills fit?"). ``skill add`` builds the front matter
a bundle needs from what is published: ``name`` from the slug (else the display
name), ``description`` from ``_meta.json`` if it has one, else from the first prose
paragraph of SKILL.md (ClawHub's own files open with ``# Title`` and one paragraph
saying what the skill does). The user is told, since the stored SKILL.md is not the
file on disk.

``_meta.json`` is a file from a stranger: it is read only if small
(``MAX_META_BYTES``), shallow (``json_too_deep`` before ``json.loads``, whose
recursion a deep array would exhaust) and an object whose fields are short text;
the front matter is written by ``yaml.safe_dump``, so no value can close the front
matter or add a key. Anything else is refused with what to add instead.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from protocol.codec import JsonRefused, load_json_object
from protocol.skill_bundle import (
    MAX_DESCRIPTION_CHARS,
    MAX_RAW_NAME_CHARS,
    InvalidSkillBundle,
    looks_like_bundle,
    normalize_skill_md,
)

META_JSON = "_meta.json"
MAX_META_BYTES = 16 * 1024  # ClawHub's are about 300 bytes
MAX_META_DEPTH = 8
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")  # "2.0.1", "1.0.0-beta.2"; else left out
HEADING = re.compile(r"#{1,6}(?:[ \t][^\n]{0,2000})?")
FENCE = re.compile(r"(?:`{3}|~{3})[^\n]{0,200}")
MARKUP_ONLY = re.compile(r"[\s*_`>#|=-]{0,200}")
FRONT_MATTER_TO_ADD = ('add front matter, four lines at the top of SKILL.md: "---" / "name: my-skill" / '
                       '"description: what it does and when to use it" / "---"')


def _text_field(meta: dict[str, Any], key: str, limit: int) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidSkillBundle(f"{META_JSON} {key} must be non-empty text")
    text = " ".join(value.split())
    if len(text) > limit:
        raise InvalidSkillBundle(f"{META_JSON} {key} is longer than {limit} characters")
    return text


def read_meta(data: str) -> dict[str, Any]:
    """``_meta.json`` as a JSON object, within its bounds; :class:`InvalidSkillBundle` otherwise."""
    try:
        return load_json_object(data.encode("utf-8", "replace"), META_JSON, MAX_META_BYTES, MAX_META_DEPTH)
    except JsonRefused as refused:
        raise InvalidSkillBundle(str(refused)) from None


def first_paragraph(body: str) -> str | None:
    """The first paragraph of prose in a Markdown body: headings, fenced code and lines of
    markup alone are skipped; the paragraph's lines joined, whitespace collapsed."""
    lines: list[str] = []
    in_fence = False
    for line in body.split("\n")[:2000]:
        stripped = line.strip()
        if FENCE.fullmatch(stripped):
            in_fence = not in_fence
            if lines:
                break
            continue
        if in_fence:
            continue
        if not stripped or HEADING.fullmatch(stripped) or MARKUP_ONLY.fullmatch(stripped):
            if lines:
                break
            continue
        lines.append(stripped)
    paragraph = " ".join(" ".join(lines).split()).strip("*_ ")
    return paragraph[:MAX_DESCRIPTION_CHARS] or None


def with_meta_front_matter(skill_md: str, meta_json: str | None) -> tuple[str, str]:
    """``skill_md`` with front matter built from ``meta_json`` (ClawHub's ``_meta.json``),
    and a sentence saying what was built. Only for a SKILL.md without front matter."""
    text = normalize_skill_md(skill_md.lstrip("\ufeff"))
    if looks_like_bundle(text):
        raise InvalidSkillBundle("SKILL.md already has front matter")
    if meta_json is None:
        raise InvalidSkillBundle(f"SKILL.md has no front matter: {FRONT_MATTER_TO_ADD}")
    meta = read_meta(meta_json)
    name = _text_field(meta, "slug", MAX_RAW_NAME_CHARS) or _text_field(meta, "displayName", MAX_RAW_NAME_CHARS)
    if name is None:
        raise InvalidSkillBundle(f"SKILL.md has no front matter and {META_JSON} has no slug or displayName: "
                                 + FRONT_MATTER_TO_ADD)
    described = _text_field(meta, "description", MAX_DESCRIPTION_CHARS)
    description = described or first_paragraph(text)
    if description is None:
        raise InvalidSkillBundle("SKILL.md has no front matter and no paragraph saying what the skill does: "
                                 + FRONT_MATTER_TO_ADD)
    front: dict[str, Any] = {"name": name, "description": description}
    latest = meta.get("latest")
    version = latest.get("version") if isinstance(latest, dict) else None
    if isinstance(version, str) and VERSION.fullmatch(version):
        front["version"] = version
    dumped = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1_000_000)
    source = f"the description from {META_JSON}" if described else "the description from its first paragraph"
    note = (f"SKILL.md had no front matter: built name {name!r} from {META_JSON} and {source} "
            "(the stored SKILL.md starts with them)")
    return f"---\n{dumped}---\n{text}", note
