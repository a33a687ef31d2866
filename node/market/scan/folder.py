"""A skill folder on disk, read for scanning (or for a bundle) within stated limits.

Published skills are folders: ``SKILL.md`` plus ``scripts/``, ``references/``,
``assets/`` and sometimes fonts or images. The scanner reads every text file of the
folder; what it cannot or will not read is said, never passed silently:

- images, fonts, audio/video and office documents are ``skipped`` (listed in the
  report with the reason): they are not instructions an agent follows. The text strings
  inside an image or an audio/video file (EXIF, PNG text chunks, ID3 tags, bytes after the
  picture), a text in the low bit of a PNG's channel or a WAV's samples, and the text of a ZIP
  appended to the file are read all the same (``media.media_strings``): a payload hidden in a
  picture is text an agent can be told to decode; a ZIP inside a media file is itself a
  ``hidden_archive`` finding (medium);
- a native executable (ELF, PE, Mach-O) is a *finding* (``embedded_executable``,
  high): a skill that ships a binary asks to be trusted without being read;
- an archive, any other file that is not UTF-8 text, or a folder over the limits is
  a *refusal* (``Unscannable``, with a code and a reason the user can act on).

The scan limits (``SCAN_LIMITS``) come from what skill hosts document (issue 39,
docs/skills-safety.md): 200 files and about 1 MB of text per skill (Langfuse), 8 MB
per upload (Claude API), 20 MB / 200 files (BigModel); Anthropic's own public skills
(docx/pptx with their OOXML schemas) are the large end of that. ``WIRE_LIMITS`` are
the market bundle's (``protocol.skill_bundle``): a skill sold on the network must
also fit one memory text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from node.market.scan.clawhub import META_JSON, with_meta_front_matter
from node.market.scan.findings import Finding, ScanReport, Severity, escape
from node.market.scan.media import ZIP_LOCAL_HEADER, appended_archive, media_strings
from node.market.scan.scanner import MAX_LINES, Unscannable, scan_refused, scan_skill, scan_text
from protocol.skill_bundle import (
    MARK,
    MAX_BUNDLE_BYTES,
    MAX_RESOURCE_BYTES,
    MAX_RESOURCES,
    MAX_SKILL_MD_BYTES,
    SKILL_MD,
    SkillBundle,
    build,
    looks_like_bundle,
    normalize_skill_md,
)

# A SKILL.md is read whole into an agent's context: the Agent Skills guidance is a body under
# ~5k tokens; a scan still reads one of 192 KiB (a bundle carries at most MAX_SKILL_MD_BYTES).
MAX_SCANNED_SKILL_MD_BYTES = 192 * 1024


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_file_bytes: int
    max_total_bytes: int
    max_entries: int = 5000  # files and folders walked, skipped ones included
    max_lines: int = 50_000  # per file
    hidden: bool = True  # read hidden files (a scan must see them; a bundle cannot carry them)
    max_skill_md_bytes: int = MAX_SCANNED_SKILL_MD_BYTES


SCAN_LIMITS = Limits(max_files=200, max_file_bytes=1024 * 1024, max_total_bytes=2 * 1024 * 1024)
WIRE_LIMITS = Limits(max_files=MAX_RESOURCES, max_file_bytes=MAX_RESOURCE_BYTES,
                     max_total_bytes=MAX_BUNDLE_BYTES, max_lines=MAX_LINES, hidden=False,
                     max_skill_md_bytes=MAX_SKILL_MD_BYTES)
NOT_INSTRUCTIONS = frozenset({
    "png", "jpg", "jpeg", "gif", "webp", "ico", "bmp", "tif", "tiff", "avif", "heic",
    "ttf", "otf", "woff", "woff2", "eot", "mp3", "wav", "ogg", "flac", "m4a", "mp4", "mov", "webm",
    "pdf", "docx", "xlsx", "pptx", "odt", "ods", "odp", "doc", "xls", "ppt"})
# Media whose embedded text is scanned (``media.media_strings``): metadata and a PNG's low bits are
# where a payload hides in a picture or a sound file. At most MAX_MEDIA_FILES of them per skill.
MEDIA = frozenset({"png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "avif", "heic",
                   "mp3", "wav", "ogg", "flac", "m4a", "mp4", "mov", "webm"})
MAX_MEDIA_FILES = 16
MEDIA_TEXT = " (text strings inside the file)"
ARCHIVES = frozenset({"zip", "tar", "gz", "tgz", "bz2", "xz", "7z", "rar", "jar", "whl", "dmg", "pkg", "iso"})
EXECUTABLE_MAGIC = (b"\x7fELF", b"MZ", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
                    b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
NEVER_READ_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv"})


@dataclass
class SkillFolder:
    skill_md: str
    resources: dict[str, str] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    executables: list[str] = field(default_factory=list)
    media_text: dict[str, str] = field(default_factory=dict)  # media file -> its embedded text strings
    media_archives: dict[str, list[str]] = field(default_factory=dict)  # media file -> members of a ZIP inside it


def _extension(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def read_folder(folder: Path, limits: Limits = SCAN_LIMITS) -> SkillFolder:
    """``folder/SKILL.md`` and its files (or a lone SKILL.md file); raises ``Unscannable``."""
    folder = Path(folder)
    skill_md_path = folder / SKILL_MD if folder.is_dir() else folder
    if not skill_md_path.is_file():
        raise Unscannable("no_skill_md", f"{skill_md_path} is not a file: give a folder with a SKILL.md, or the file")
    largest = min(limits.max_file_bytes, limits.max_skill_md_bytes)
    if skill_md_path.stat().st_size > largest:
        raise Unscannable("too_large", f"{skill_md_path} is larger than {largest} bytes: split it into references/")
    skill_md = _read_text(skill_md_path, SKILL_MD, limits.max_lines)
    result = SkillFolder(skill_md)
    if not folder.is_dir():
        return result
    total = len(skill_md.encode("utf-8"))
    entries = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in NEVER_READ_DIRS and (limits.hidden or not d.startswith(".")))
        for name in sorted(files):
            entries += 1
            if entries > limits.max_entries:
                raise Unscannable("too_many_files", f"{folder} holds more than {limits.max_entries} files")
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            if relative == SKILL_MD or (name.startswith(".") and not limits.hidden) or name == ".DS_Store":
                continue
            if path.is_symlink():
                result.skipped.append({"file": relative, "reason": "symbolic link, not followed"})
                continue
            extension = _extension(name)
            if extension in NOT_INSTRUCTIONS:
                result.skipped.append({"file": relative, "reason": f"{extension} file, not text (not read)"})
                if (extension in MEDIA and limits.hidden and len(result.media_text) < MAX_MEDIA_FILES
                        and path.stat().st_size <= limits.max_file_bytes):
                    data = path.read_bytes()
                    strings = media_strings(data, extension)
                    if strings:
                        result.media_text[relative] = strings
                    if ZIP_LOCAL_HEADER in data:
                        members = appended_archive(data)[0]
                        if members:
                            result.media_archives[relative] = members
                continue
            if extension in ARCHIVES:
                raise Unscannable("archive", f"{relative} is an archive the scanner cannot read: unpack it into "
                                  "the folder (or remove it) and scan again")
            size = path.stat().st_size
            if size > limits.max_file_bytes:
                raise Unscannable("too_large", f"{relative} is {size} bytes, over {limits.max_file_bytes} per "
                                  "file: split it or leave it out of the skill")
            with path.open("rb") as handle:
                head = handle.read(4)
            if head.startswith(EXECUTABLE_MAGIC):
                result.executables.append(relative)
                continue
            total += size
            if total > limits.max_total_bytes:
                raise Unscannable("too_large", f"{folder} holds more than {limits.max_total_bytes} bytes of text")
            if len(result.resources) >= limits.max_files:
                raise Unscannable("too_many_files", f"{folder} holds more than {limits.max_files} text files")
            result.resources[relative] = _read_text(path, relative, limits.max_lines)
    return result


def market_bundle(folder: Path) -> tuple[SkillBundle, str | None]:
    """A local skill folder as the market bundle ``skill add`` stores, and a note when its
    front matter had to be built (ClawHub's layout, :mod:`node.market.scan.clawhub`).

    Read within the wire limits; a file the bundle cannot carry (an image, a binary) is
    refused with its name, never dropped. Raises ``Unscannable`` (what the folder holds)
    or ``InvalidSkillBundle`` (the bundle's format and limits)."""
    skill = read_folder(folder, WIRE_LIMITS)
    if skill.skipped or skill.executables:
        names = [entry["file"] for entry in skill.skipped] + skill.executables
        raise Unscannable("not_text", f"{', '.join(names[:5])}: a market bundle carries text files only; "
                          "remove these files or host them elsewhere and link to them")
    skill_md = skill.skill_md.lstrip("\ufeff")
    note = None
    if not looks_like_bundle(normalize_skill_md(skill_md)):
        skill_md, note = with_meta_front_matter(skill_md, skill.resources.get(META_JSON))
    return build(skill_md, skill.resources), note


def _read_text(path: Path, relative: str, max_lines: int) -> str:
    data = path.read_bytes()
    if b"\x00" in data:
        raise Unscannable("not_text", f"{relative} is not text (it holds NUL bytes): remove it, or convert "
                          "it to UTF-8 text if the skill needs it")
    if data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") >= max_lines:  # as scan_text counts
        # lines (a buyer scans each file of a bundle within MAX_LINES): what is added can be bought
        raise Unscannable("too_many_lines", f"{relative} has more than {max_lines} lines: split it into "
                          "several files, or leave it out of the skill")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unscannable("not_text", f"{relative} is not UTF-8 text (byte {error.start}): save it as "
                          "UTF-8, or remove it if the skill does not need it") from error


def scan_folder(folder: Path) -> ScanReport:
    """Scan a skill folder as published; never raises for its content (see the module doc)."""
    try:
        skill = read_folder(folder, SCAN_LIMITS)
    except Unscannable as error:
        return scan_refused(str(error), error.code)
    except OSError as error:
        return scan_refused(f"cannot read {folder}: {error.strerror or error}", "unreadable")
    if MARK in skill.skill_md and not Path(folder).is_dir():  # a bundle's canonical text in a file
        return scan_text(skill.skill_md)
    report = scan_skill(skill.skill_md.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").strip(),
                        sorted([(path, text.replace("\r\n", "\n").replace("\r", "\n"))
                                for path, text in skill.resources.items()]
                               + [(path + MEDIA_TEXT, text) for path, text in skill.media_text.items()]),
                        skill.skipped, max_lines=SCAN_LIMITS.max_lines)
    if not (skill.executables or skill.media_archives) or report.refused is not None:
        return report
    extra = [Finding("embedded_executable", Severity.HIGH, 0, f"a native executable file: {path}", path)
             for path in skill.executables]
    # A ZIP riding inside a picture or sound: an archive smuggled past the archive refusal. Its text
    # members were scanned with the file's strings; what else it holds was not.
    extra += [Finding("hidden_archive", Severity.MEDIUM, 0, escape(
        f"an archive hidden inside {path} ({', '.join(members[:5])}): its text was scanned, nothing else in it"), path)
        for path, members in skill.media_archives.items()]
    return ScanReport.of(report.findings + extra, report.skipped)
