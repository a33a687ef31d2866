"""Install a skill held by the node as an Agent Skills folder: ``DIR/<name>/SKILL.md``.

The skill's text is either a SKILL.md bundle (``protocol.skill_bundle``) or plain
text; plain text is wrapped into a SKILL.md whose front matter comes from the
listing's name and summary. Right after the front matter a provenance line names
the seller, the payment transaction and the content hash the buyer verified::

    <!-- crystalmesh: seller=<key hex> tx=<hash> sha256=<content hash> listing=<id> -->

Everything in a bought skill comes from a stranger: the folder name is the
validated skill name, resource paths were validated by the bundle parser and are
checked again here, files are created exclusively (never through a symlink) in a
fresh temporary folder that is renamed into place only when complete, so a
refused or interrupted install leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from node.api import ApiClient, ApiError, shapes
from node.errors import CrystalmeshError
from node.market import scan_text
from protocol.skill_bundle import (
    NAME,
    SKILL_MD,
    SkillBundle,
    build,
    check_resource_path,
    decode_or_none,
    split_front_matter,
)

log = logging.getLogger(__name__)

PROVENANCE_PREFIX = "<!-- crystalmesh:"
ALLOWED_TOOLS = "allowed-tools"
_PROVENANCE_VALUE = re.compile(r"[A-Za-z0-9:_.x-]{1,200}")


class SkillInstallError(CrystalmeshError):
    """The skill cannot be installed as asked; nothing was written."""


@dataclass(frozen=True)
class SkillSource:
    """A skill's text and where it came from (what the provenance line records)."""

    text: str
    content_hash: str
    seller: str = "local"
    tx_hash: str | None = None
    listing_id: str | None = None
    name_hint: str | None = None
    summary_hint: str | None = None


def slug(text: str, fallback: str) -> str:
    """An Agent Skills name (lowercase, digits, single hyphens, <= 64) made from free text."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    name = ""
    for word in words:
        candidate = f"{name}-{word}" if name else word
        if len(candidate) > 64:
            break
        name = candidate
    return name or fallback


def bundle_for(source: SkillSource) -> SkillBundle:
    """The bundle to install: the skill's own, or a SKILL.md wrapped around a plain-text skill."""
    bundle = decode_or_none(source.text)
    if bundle is not None:
        return bundle
    first_line = source.text.strip().splitlines()[0] if source.text.strip() else ""
    name = slug(source.name_hint or first_line, "skill-" + source.content_hash[:12])
    description = " ".join((source.summary_hint or first_line or name).split())[:1024]
    quoted = description.replace("\\", "\\\\").replace('"', '\\"')
    return build(f'---\nname: {name}\ndescription: "{quoted}"\n---\n{source.text.strip()}\n')


def provenance_line(source: SkillSource) -> str:
    fields = {"seller": source.seller, "tx": source.tx_hash or "none",
              "sha256": source.content_hash, "listing": source.listing_id or "none"}
    for key, value in fields.items():
        if not _PROVENANCE_VALUE.fullmatch(value):
            raise SkillInstallError(f"provenance {key} {value[:80]!r} is not a plain identifier")
    return PROVENANCE_PREFIX + " " + " ".join(f"{k}={v}" for k, v in fields.items()) + " -->"


def installed_skill_md(bundle: SkillBundle, source: SkillSource, keep_allowed_tools: bool = False) -> str:
    """The SKILL.md to write: the seller's, with the provenance line first in the body.

    ``allowed-tools`` pre-approves tools in hosts that honour it; from a stranger that
    is a grant nobody reviewed, so it is dropped unless ``keep_allowed_tools``.
    """
    front, body = split_front_matter(bundle.skill_md)
    drop_tools = ALLOWED_TOOLS in bundle.front_matter and not keep_allowed_tools
    if drop_tools or bundle.front_matter.get("name") != bundle.name:
        # The folder is named after the normalised name, and hosts require the two to match.
        kept = {key: (bundle.name if key == "name" else value) for key, value in bundle.front_matter.items()
                if not (drop_tools and key == ALLOWED_TOOLS)}
        front = yaml.safe_dump(kept, sort_keys=False, allow_unicode=True, width=100).rstrip("\n")
    return f"---\n{front}\n---\n{provenance_line(source)}\n{body}".rstrip("\n") + "\n"


def _write_new(path: Path, content: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)


def install(source: SkillSource, to_dir: Path, force: bool = False,
            keep_allowed_tools: bool = False, accept_scan_risk: bool = False) -> dict[str, Any]:
    """Write ``to_dir/<name>/SKILL.md`` (+ resources); returns what was written.

    The skill is scanned first (``node.market.scan``): a ``quarantine`` or ``refused``
    verdict refuses the install, and nothing is written, unless the operator passes
    ``accept_scan_risk``.
    """
    bundle = bundle_for(source)
    report = scan_text(source.text)
    if report.blocked and not accept_scan_risk:
        what = "could not read" if report.refused is not None else "quarantined"
        raise SkillInstallError(
            f"the skill scan {what} this skill ({report.summary()}); nothing was installed. "
            "Read the findings (`crystalmesh skill scan ... --json`); install anyway with "
            "--accept-scan-risk")
    if not NAME.fullmatch(bundle.name):
        raise SkillInstallError(f"skill name {bundle.name[:80]!r} cannot be a folder name")
    to_dir = Path(to_dir)
    try:
        to_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SkillInstallError(f"cannot create {to_dir}: {error.strerror}") from error
    if not to_dir.is_dir():
        raise SkillInstallError(f"{to_dir} is not a directory")
    target = to_dir / bundle.name
    if (target.exists() or target.is_symlink()) and not force:
        raise SkillInstallError(f"{target} already exists; pass --force to replace it")
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle.name}.", dir=to_dir))
    try:
        _write_new(staging / SKILL_MD, installed_skill_md(bundle, source, keep_allowed_tools))
        for path, content in bundle.resources:
            check_resource_path(path)
            destination = staging.joinpath(*path.split("/"))
            if not destination.resolve().is_relative_to(staging.resolve()):
                raise SkillInstallError(f"resource {path!r} would leave the skill folder")
            for parent in reversed(destination.relative_to(staging).parents):
                folder = staging / parent
                if not folder.exists():
                    folder.mkdir()
                elif folder.is_symlink() or not folder.is_dir():
                    raise SkillInstallError(f"resource {path!r} clashes with a file")
            _write_new(destination, content)
        os.chmod(staging, 0o755)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("skill installed name=%s dir=%s seller=%s", bundle.name, target, source.seller[:16])
    return {"name": bundle.name, "path": str(target / SKILL_MD), "dir": str(target),
            "resources": [path for path, _ in bundle.resources], "seller": source.seller,
            "tx_hash": source.tx_hash, "content_hash": source.content_hash,
            "listing_id": source.listing_id, "bundle": decode_or_none(source.text) is not None,
            "allowed_tools_dropped": ALLOWED_TOOLS in bundle.front_matter and not keep_allowed_tools,
            "scan": report.to_dict()}


def _imported_from(crystal: shapes.Crystal) -> dict[str, Any]:
    for node in crystal.get("provenanceDag") or []:
        if isinstance(node, dict) and node.get("operation") == "imported":
            metadata = node.get("metadata")
            return metadata if isinstance(metadata, dict) else {}
    return {}


def _from_crystal(crystal: shapes.Crystal, name_hint: str | None = None) -> SkillSource:
    if crystal.get("semanticType") not in ("skill", "task_pattern"):
        raise SkillInstallError(f"{crystal.get('id')} is a {crystal.get('semanticType')} memory, not a skill")
    imported = _imported_from(crystal)
    governance = crystal.get("governance") or {}
    return SkillSource(
        text=str(crystal["text"]),
        content_hash=str(crystal["hash"]),
        seller=str(governance.get("peerOrigin") or "local"),
        tx_hash=imported.get("tx_hash") if isinstance(imported.get("tx_hash"), str) else None,
        listing_id=imported.get("listing_id") if isinstance(imported.get("listing_id"), str) else None,
        name_hint=name_hint,
    )


def source_from_crystal(crystal: shapes.Crystal) -> SkillSource:
    """A skill memory (as the API returns it) as an installable source with its provenance."""
    return _from_crystal(crystal)


def source_from_node(client: ApiClient, ref: str) -> SkillSource:
    """Find ``ref`` (a skill crystal id, or a listing this node bought) through the local API."""
    if not ref or "/" in ref or "?" in ref or "#" in ref or ref in (".", ".."):
        raise SkillInstallError(f"not a crystal or listing id: {ref!r}")
    try:
        return _from_crystal(client.memory_get(ref))
    except ApiError as error:
        if error.status != 404:
            raise
    purchases = client.purchases(1000)
    mine = [p for p in purchases if isinstance(p, dict) and p.get("listing_id") == ref
            and p.get("state") in ("completed", "delivered_not_ingested")]
    if not mine and any(isinstance(p, dict) and p.get("listing_id") == ref
                        and p.get("state") == "quarantined" for p in purchases):
        raise SkillInstallError(f"{ref} is quarantined; `crystalmesh skill release {ref}` first")
    if not mine:
        raise SkillInstallError(f"{ref} is neither a skill crystal nor a listing this node bought")
    purchase = mine[0]
    if crystal_id := purchase.get("crystal_id"):
        crystal = client.memory_get(crystal_id)
        return _from_crystal(crystal, name_hint=purchase.get("name"))
    delivered = client.redeliver(ref)
    payload = delivered.get("payload")
    if not isinstance(payload, str):
        raise SkillInstallError(f"the skill bought as {ref[:16]} is not held by this node")
    return SkillSource(text=payload, content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                       seller=str(purchase.get("seller_key") or "unknown"),
                       tx_hash=purchase.get("tx_hash"), listing_id=ref, name_hint=purchase.get("name"))
