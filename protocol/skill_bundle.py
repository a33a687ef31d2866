"""A skill in the Agent Skills layout (``SKILL.md`` + small resource files), as one text.

A skill crystal that carries a bundle stores its *canonical encoding* as its
text, so the crystal's content hash, the listing's ``content_hash`` and the
``Delivery`` payload are all the hash of that one encoding; nothing else on the
wire changes. A plain-text skill is simply a text that is not a bundle.

Canonical encoding (UTF-8 text, no trailing newline)::

    <SKILL.md: LF line ends, surrounding whitespace stripped, starts with "---\\n">
    then, for each resource in path order:
    \\n<<<crystalmesh-skill-resource path=<path> bytes=<n>>>>\\n<n bytes of UTF-8 content>
    and, if there was at least one resource:
    \\n<<<crystalmesh-skill-end>>>

``SKILL.md`` may not contain ``<<<crystalmesh-skill-``, so the first resource
header is unambiguous; resource contents are length-prefixed and may contain
anything but NUL. :func:`decode` accepts only an encoding that :func:`encode`
would write byte for byte.

A bundle may come from a hostile seller, so parsing is strict where it protects
the reader and lenient where published skills differ: sizes are capped before any
parsing, and the YAML front matter may use no anchors, aliases or tags, nests at most
``MAX_FRONT_MATTER_DEPTH`` levels and holds at most ``MAX_FRONT_MATTER_NODES`` values
before it is loaded with ``yaml.safe_load``. Within that, the front matter is read
as it is published (issue 39): keys beyond the Agent Skills ones are kept (and
scanned, as all of SKILL.md is), ``metadata`` may be a nested map (ClawHub's
``metadata: {clawdbot: {requires: {bins: [...]}}}``), ``allowed-tools`` a string or a
list, and a ``name`` that is not a plain slug is kept as written in the front matter
while ``SkillBundle.name`` is its normalised form (:func:`normalize_name`), the one
used for folders and listings. Resource paths are relative, made of plain names (no
``..``, no hidden files, no backslashes).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from protocol.purchase import MAX_SKILL_PAYLOAD_BYTES
from protocol.schema import InvalidMessage

SKILL_MD = "SKILL.md"
# The largest skill every node already carries (a listing's size_bytes, a Delivery's payload,
# one 256 KiB frame): 98.6 % of 3,175 published skills fit (docs/protocol.md 4.5, "Sizes").
MAX_BUNDLE_BYTES = MAX_SKILL_PAYLOAD_BYTES
MAX_SKILL_MD_BYTES = 128 * 1024  # the largest published SKILL.md measured: 125 KiB
MAX_FRONT_MATTER_BYTES = 16 * 1024  # ClawHub's nested metadata and long descriptions fit
MAX_FRONT_MATTER_DEPTH = 6  # front matter > metadata > clawdbot > requires > bins (a list)
MAX_FRONT_MATTER_NODES = 2000  # YAML events: a bound on the work, whatever the shape
MAX_RESOURCES = 64  # many small files (scripts/, references/) within the same total
MAX_RESOURCE_BYTES = 128 * 1024  # a reference or script as large as the largest SKILL.md
MAX_PATH_CHARS = 128
MAX_PATH_DEPTH = 6
MAX_NAME_CHARS = 64
MAX_RAW_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 1024
MAX_RAW_DESCRIPTION_CHARS = 8192

MARK = "<<<crystalmesh-skill-"
RESOURCE_HEADER = re.compile(
    rb"<<<crystalmesh-skill-resource path=([A-Za-z0-9._/-]{1,128}) bytes=(0|[1-9][0-9]{0,5})>>>\n"
)
END = "<<<crystalmesh-skill-end>>>"
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
PATH_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
NAME_RUN = re.compile(r"[^a-z0-9]{1,10000}")
ALLOWED_TOOLS = "allowed-tools"
LOOSE_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]{0,63}):[ \t]{1,20}([^\s\"'\[{|>&*!%@`#][^\n]{0,8000})")


class InvalidSkillBundle(InvalidMessage):
    """A SKILL.md or bundle breaks the format or its limits; nothing was accepted."""


@dataclass(frozen=True)
class SkillBundle:
    """A validated bundle. Build one with :func:`build` or :func:`decode`, never directly."""

    name: str
    description: str
    skill_md: str
    resources: tuple[tuple[str, str], ...] = ()
    front_matter: dict[str, Any] = field(default_factory=dict)

    @property
    def body(self) -> str:
        return split_front_matter(self.skill_md)[1]

    def encode(self) -> str:
        return encode(self)

    def content_hash(self) -> str:
        """sha256 (hex) of the canonical encoding: the listing's and delivery's content hash."""
        return hashlib.sha256(encode(self).encode("utf-8")).hexdigest()


def _utf8_size(text: str, what: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidSkillBundle(f"{what} is not valid Unicode text") from error


def normalize_skill_md(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def split_front_matter(skill_md: str) -> tuple[str, str]:
    """(front matter YAML, body) of a normalized SKILL.md."""
    if not skill_md.startswith("---\n"):
        raise InvalidSkillBundle("SKILL.md must start with a '---' line (YAML front matter)")
    rest = skill_md[4:]
    if rest.startswith("---\n") or rest == "---":
        return "", rest[4:]
    end = rest.find("\n---\n")
    if end < 0:
        if rest.endswith("\n---"):
            return rest[:-4], ""
        raise InvalidSkillBundle("SKILL.md front matter is not closed by a '---' line")
    return rest[:end], rest[end + 5:]


def _check_yaml_shape(front: str) -> None:
    """Refuse anchors, aliases, explicit tags and deep nesting before anything is built."""
    depth = 0
    try:
        for count, event in enumerate(yaml.parse(front, Loader=yaml.SafeLoader)):
            if count > MAX_FRONT_MATTER_NODES:
                raise InvalidSkillBundle(
                    f"SKILL.md front matter holds more than {MAX_FRONT_MATTER_NODES} values")
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise InvalidSkillBundle("SKILL.md front matter may not use YAML anchors or aliases")
            tag = getattr(event, "tag", None)
            implicit = getattr(event, "implicit", True)
            if tag is not None and not (implicit is True or (isinstance(implicit, tuple) and any(implicit))):
                raise InvalidSkillBundle("SKILL.md front matter may not use YAML tags")
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > MAX_FRONT_MATTER_DEPTH:
                    raise InvalidSkillBundle(
                        f"SKILL.md front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels")
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
    except yaml.YAMLError as error:
        raise InvalidSkillBundle(f"SKILL.md front matter is not valid YAML: {_first_line(error)}") from error


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def _plain(value: Any) -> Any:
    """The loaded front matter as JSON values: dates and times as ISO text, keys as text
    (``version: 2024-05-01`` would otherwise be a ``date`` no JSON answer can carry)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _quote_loose_values(front: str) -> str:
    """Front matter as hosts read it: ``description: Use when: ...`` (a colon in a plain value,
    not valid YAML but common in published skills) is read as one string. Only when the YAML
    does not parse, and only top-level ``key: value`` lines whose value is not quoted, a list
    or a map; the text in the bundle is unchanged."""
    try:
        list(yaml.parse(front, Loader=yaml.SafeLoader))
        return front
    except yaml.YAMLError:
        pass
    lines = []
    for line in front.split("\n"):
        match = LOOSE_VALUE.fullmatch(line)
        if match is not None and ": " in match.group(2):
            line = f"{match.group(1)}: {json.dumps(match.group(2).strip())}"
        lines.append(line)
    return "\n".join(lines)


def normalize_name(raw: str) -> str:
    """A published ``name`` as a slug (``NAME``, at most 64 characters) for folders and listings.

    "PDF Tools (beta)" -> ``pdf-tools-beta``; a name with no letter or digit left becomes
    ``skill-`` and 8 hex digits of its hash, so two such names stay apart.
    """
    if len(raw) <= MAX_NAME_CHARS and NAME.fullmatch(raw):
        return raw
    ascii_name = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    slug = NAME_RUN.sub("-", ascii_name.strip().lower()).strip("-")
    if len(slug) > MAX_NAME_CHARS:
        cut = slug[:MAX_NAME_CHARS]
        if slug[MAX_NAME_CHARS] != "-" and "-" in cut:  # end on a whole word
            cut = cut[:cut.rfind("-")]
        slug = cut.strip("-")
    return slug or "skill-" + hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:8]


def _scalar_text(data: dict[str, Any], key: str, limit: int, required: bool) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not (isinstance(value, str | int | float) or hasattr(value, "isoformat")):
        raise InvalidSkillBundle(f"SKILL.md front matter {key} must be text")
    text = str(value).strip()
    if not text:
        raise InvalidSkillBundle(f"SKILL.md front matter {key} must not be empty")
    if len(text) > limit:
        raise InvalidSkillBundle(f"SKILL.md front matter {key} is longer than {limit} characters")
    return text


def parse_front_matter(front: str) -> dict[str, Any]:
    """The front matter as published: ``name`` and ``description`` required, every other key kept.

    ``allowed-tools`` must be a string or a list of strings (it grants tools, so its
    shape is checked); ``metadata`` must be a map; other keys may hold any YAML the
    shape check let through.
    """
    if _utf8_size(front, "SKILL.md front matter") > MAX_FRONT_MATTER_BYTES:
        raise InvalidSkillBundle(f"SKILL.md front matter is larger than {MAX_FRONT_MATTER_BYTES} bytes")
    front = _quote_loose_values(front)
    _check_yaml_shape(front)
    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as error:
        raise InvalidSkillBundle(f"SKILL.md front matter is not valid YAML: {_first_line(error)}") from error
    if not isinstance(data, dict):
        raise InvalidSkillBundle("SKILL.md front matter must be a YAML mapping with name and description")
    if not all(isinstance(key, str) for key in data):
        raise InvalidSkillBundle("SKILL.md front matter keys must be text")
    data = _plain(data)
    _scalar_text(data, "name", MAX_RAW_NAME_CHARS, required=True)
    _scalar_text(data, "description", MAX_RAW_DESCRIPTION_CHARS, required=True)
    tools = data.get(ALLOWED_TOOLS)
    if tools is not None and not isinstance(tools, str) and not (
            isinstance(tools, list) and all(isinstance(tool, str) for tool in tools)):
        raise InvalidSkillBundle("SKILL.md allowed-tools must be a string or a list of strings")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidSkillBundle("SKILL.md metadata must be a map (metadata:\n  author: ...)")
    return data


def allowed_tools(front_matter: Mapping[str, Any]) -> list[str]:
    """``allowed-tools`` as a list, whether written "Read Grep" / "Read, Grep" or as a YAML list."""
    tools = front_matter.get(ALLOWED_TOOLS)
    if isinstance(tools, str):
        return [tool for tool in re.split(r"[\s,]{1,100}", tools) if tool]
    return [tool for tool in tools if tool] if isinstance(tools, list) else []


def check_resource_path(path: str) -> str:
    """A resource path that can be written under the skill's folder and nowhere else."""
    parts = path.split("/")
    if (not path or len(path) > MAX_PATH_CHARS or len(parts) > MAX_PATH_DEPTH
            or not all(PATH_PART.fullmatch(part) for part in parts)
            or any(part in (".", "..") for part in parts)):
        raise InvalidSkillBundle(
            f"resource path {path[:MAX_PATH_CHARS]!r} must be relative, at most {MAX_PATH_DEPTH} "
            "levels of letters, digits, '.', '_', '-' (no '..', no hidden files)")
    if path.casefold() == SKILL_MD.casefold():
        raise InvalidSkillBundle("a resource may not be named SKILL.md")
    return path


def build(skill_md: str, resources: Mapping[str, str] | None = None) -> SkillBundle:
    """Validate a SKILL.md text and its resource files (path -> UTF-8 text) into a bundle."""
    if _utf8_size(skill_md, "SKILL.md") > MAX_SKILL_MD_BYTES:
        raise InvalidSkillBundle(f"SKILL.md is larger than {MAX_SKILL_MD_BYTES} bytes")
    text = normalize_skill_md(skill_md)
    if "\x00" in text:
        raise InvalidSkillBundle("SKILL.md contains a NUL character")
    if MARK in text:
        raise InvalidSkillBundle(f"SKILL.md may not contain {MARK!r}")
    front, _ = split_front_matter(text)
    data = parse_front_matter(front)
    items = dict(resources or {})
    if len(items) > MAX_RESOURCES:
        raise InvalidSkillBundle(f"a bundle holds at most {MAX_RESOURCES} resource files")
    seen: set[str] = set()
    checked: list[tuple[str, str]] = []
    for path, content in sorted(items.items()):
        if not isinstance(path, str) or not isinstance(content, str):
            raise InvalidSkillBundle("resources must map paths to UTF-8 text")
        check_resource_path(path)
        folded = path.casefold()
        if folded in seen or any(other.startswith(folded + "/") or folded.startswith(other + "/")
                                 for other in seen):
            raise InvalidSkillBundle(f"resource path {path!r} clashes with another resource")
        seen.add(folded)
        if _utf8_size(content, f"resource {path}") > MAX_RESOURCE_BYTES:
            raise InvalidSkillBundle(f"resource {path} is larger than {MAX_RESOURCE_BYTES} bytes")
        if "\x00" in content:
            raise InvalidSkillBundle(f"resource {path} contains a NUL character (text files only)")
        checked.append((path, content))
    description = " ".join(str(data["description"]).split())[:MAX_DESCRIPTION_CHARS]
    raw_name = str(data["name"]).strip()
    if any(part in raw_name for part in ("/", "\\", "..")):
        # A slug would make "../../evil" harmless here, but a reader of the stored SKILL.md
        # that trusts its name (another tool, an older node) would not: refused, as before.
        raise InvalidSkillBundle("SKILL.md front matter name must be a name, not a path ('/', '\\' or '..')")
    bundle = SkillBundle(name=normalize_name(raw_name), description=description, skill_md=text,
                         resources=tuple(checked), front_matter=data)
    if len(encode(bundle).encode("utf-8")) > MAX_BUNDLE_BYTES:
        raise InvalidSkillBundle(f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes")
    return bundle


def encode(bundle: SkillBundle) -> str:
    parts = [bundle.skill_md]
    for path, content in bundle.resources:
        parts.append(f"\n<<<crystalmesh-skill-resource path={path} bytes={len(content.encode('utf-8'))}>>>\n")
        parts.append(content)
    if bundle.resources:
        parts.append("\n" + END)
    return "".join(parts)


def looks_like_bundle(text: str) -> bool:
    """True if ``text`` claims to be a bundle (starts with front matter); :func:`decode` decides."""
    return text.startswith("---\n")


def decode(text: str) -> SkillBundle:
    """Parse a canonical encoding; anything :func:`encode` would not write is refused."""
    raw = text.encode("utf-8") if _utf8_size(text, "bundle") <= MAX_BUNDLE_BYTES else None
    if raw is None:
        raise InvalidSkillBundle(f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes")
    start = raw.find(b"\n" + MARK.encode())
    skill_md = raw if start < 0 else raw[:start]
    resources: dict[str, str] = {}
    position = start
    while 0 <= position < len(raw):
        if raw[position:] == ("\n" + END).encode():
            position = len(raw)
            break
        match = RESOURCE_HEADER.match(raw, position + 1)
        if match is None or raw[position:position + 1] != b"\n":
            raise InvalidSkillBundle("malformed resource header in the bundle")
        path = match.group(1).decode()
        size = int(match.group(2))
        content_end = match.end() + size
        if content_end > len(raw) or size > MAX_RESOURCE_BYTES or path in resources:
            raise InvalidSkillBundle(f"resource {path} is truncated, oversize or repeated")
        try:
            resources[path] = raw[match.end():content_end].decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidSkillBundle(f"resource {path} is not UTF-8 text") from error
        if len(resources) > MAX_RESOURCES:
            raise InvalidSkillBundle(f"a bundle holds at most {MAX_RESOURCES} resource files")
        position = content_end
    bundle = build(skill_md.decode("utf-8"), resources)
    if encode(bundle) != text:
        raise InvalidSkillBundle("the bundle is not in canonical form")
    return bundle


def decode_or_none(text: str) -> SkillBundle | None:
    """The bundle in a skill's text, or None for a plain-text skill (or a broken bundle)."""
    if not looks_like_bundle(text):
        return None
    try:
        return decode(text)
    except InvalidSkillBundle:
        return None


__all__ = [
    "ALLOWED_TOOLS",
    "MAX_BUNDLE_BYTES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_RAW_NAME_CHARS",
    "MAX_RESOURCE_BYTES",
    "MAX_SKILL_MD_BYTES",
    "NAME",
    "SKILL_MD",
    "InvalidSkillBundle",
    "SkillBundle",
    "allowed_tools",
    "build",
    "check_resource_path",
    "decode",
    "decode_or_none",
    "encode",
    "looks_like_bundle",
    "normalize_name",
    "normalize_skill_md",
    "parse_front_matter",
    "split_front_matter",
]
