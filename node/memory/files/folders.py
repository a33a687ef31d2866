"""Which files under a folder are worth indexing, and their bytes, read safely.

Runs in the process of whoever indexes (the CLI, or the node for its own
``memory.index_paths``); never on a path an HTTP request names.

``walk`` goes down a folder in name order and leaves out, each with a reason
counted: what ``.gitignore`` files ignore (``ignored``: every ``.gitignore``
from the enclosing repository's top down to each folder, and the repository's
``.git/info/exclude``, with git's precedence: a deeper file wins, within a file
the last matching line; an ignored folder is not entered, as in git), hidden
names (``hidden``: dot-files and dot-folders such as ``.git``, ``.env``,
``.venv``, as ripgrep does; a path named explicitly is taken even if hidden),
symbolic links (``symlink``: never followed, so nothing outside the folder is
read and no loop is walked), the node's own data dir (``data_dir``), files over
the size cap (``oversize``), binary files known by their suffix (``binary``; the
others are found by a NUL byte when read), generated files (``generated``: lock
files, minified bundles, source maps), names that are not valid UTF-8 or hold
control characters (``bad_name``), and everything past ``max_files``.
``read_file`` opens with ``O_NOFOLLOW`` and reads at most the cap plus one byte.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

DEFAULT_MAX_FILE_BYTES = 512 * 1024
MAX_FILES = 100_000  # per root: a walk of a whole home directory stops here
MAX_IGNORE_FILE_BYTES = 256 * 1024
BINARY_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tif", ".tiff", ".psd", ".heic",
    ".pdf", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war", ".whl",
    ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".lib", ".class", ".pyc", ".pyo", ".wasm", ".bin",
    ".db", ".sqlite", ".sqlite3", ".hnsw", ".onnx", ".pt", ".pth", ".safetensors", ".npy", ".npz",
    ".parquet", ".arrow", ".mp3", ".mp4", ".m4a", ".wav", ".flac", ".ogg", ".mov", ".avi", ".mkv",
    ".webm", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".key", ".pem", ".p12", ".pfx", ".der",
})
GENERATED_NAMES = frozenset({"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "uv.lock",
                             "cargo.lock", "gemfile.lock", "composer.lock", "go.sum", "pipfile.lock"})
GENERATED_SUFFIXES = (".min.js", ".min.css", ".map", ".lock", ".svg")


@dataclass(frozen=True)
class FileEntry:
    path: str  # absolute
    size: int
    mtime_ns: int


@dataclass
class Walk:
    """What a walk found under ``root``: files to index, and what it left out and why."""

    root: str
    files: list[FileEntry] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_paths: dict[str, str] = field(default_factory=dict)  # a left-out file or folder -> reason

    def skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths[path] = reason

    def reason_for(self, path: str) -> str:
        """Why a file indexed before is not among ``files`` now: its own skip reason, the reason of
        the folder that was left out around it, else ``deleted``."""
        probe = path
        while True:
            if probe in self.skipped_paths:
                return self.skipped_paths[probe]
            parent = os.path.dirname(probe)
            if parent == probe or len(parent) < len(self.root):
                return "deleted"
            probe = parent


class IgnoreRules:
    """``.gitignore`` files from the repository's top down to a folder (see the module docstring)."""

    def __init__(self, levels: Sequence[tuple[str, pathspec.PathSpec]] = ()) -> None:
        self.levels = list(levels)  # (folder, its patterns), outermost first

    def within(self, folder: str) -> IgnoreRules:
        """These rules plus ``folder``'s own ``.gitignore``."""
        spec = _read_spec(os.path.join(folder, ".gitignore"))
        return IgnoreRules([*self.levels, (folder, spec)]) if spec is not None else self

    def ignored(self, path: str, is_dir: bool) -> bool:
        for folder, spec in reversed(self.levels):
            relative = os.path.relpath(path, folder)
            if relative.startswith(".."):
                continue
            result = spec.check_file(relative + ("/" if is_dir else ""))
            if result.include is not None:
                return bool(result.include)
        return False


def _read_spec(path: str) -> pathspec.PathSpec | None:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:  # git skips a line it cannot read; so do we
        return pathspec.GitIgnoreSpec.from_lines([line for line in lines if _valid_pattern(line)])


def _valid_pattern(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def rules_for(root: str) -> IgnoreRules:
    """The ignore rules in force at ``root``: those of every folder from its repository's top
    (the nearest ancestor holding ``.git``) down to ``root`` itself."""
    chain: list[str] = []
    probe = root
    top: str | None = None
    while True:
        chain.append(probe)
        if os.path.lexists(os.path.join(probe, ".git")):
            top = probe
            break
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    folders = list(reversed(chain)) if top is not None else [root]
    rules = IgnoreRules()
    if top is not None:
        exclude = _read_spec(os.path.join(top, ".git", "info", "exclude"))
        if exclude is not None:
            rules = IgnoreRules([(top, exclude)])
    for folder in folders:
        rules = rules.within(folder)
    return rules


def _bad_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # surrogate-escaped bytes that are not UTF-8
        return True
    return any(ord(character) < 32 or ord(character) == 127 for character in name)


def _generated(name: str) -> bool:
    lower = name.lower()
    return lower in GENERATED_NAMES or lower.endswith(GENERATED_SUFFIXES)


def walk(root: str | Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, exclude: Sequence[str | Path] = (),
         max_files: int = MAX_FILES) -> Walk:
    """The files under ``root`` (a folder, or one file) worth indexing; see the module docstring."""
    top = os.path.realpath(os.path.expanduser(str(root)))
    excluded = {os.path.realpath(os.path.expanduser(str(path))) for path in exclude}
    found = Walk(top)
    try:
        info = os.stat(top)
    except OSError:
        found.skip(top, "missing")
        return found
    if stat.S_ISREG(info.st_mode):
        _consider(found, top, os.path.basename(top), info, max_file_bytes)
        return found
    if not stat.S_ISDIR(info.st_mode) or top in excluded:
        found.skip(top, "data_dir" if top in excluded else "not_a_file")
        return found
    for path, name, entry_info in _entries(found, top, rules_for(top), excluded):
        if len(found.files) >= max_files:
            found.skip(path, "over_file_limit")
            continue
        _consider(found, path, name, entry_info, max_file_bytes)
    return found


def _consider(found: Walk, path: str, name: str, info: os.stat_result, max_file_bytes: int) -> None:
    lower = name.lower()
    if os.path.splitext(lower)[1] in BINARY_SUFFIXES:
        found.skip(path, "binary")
    elif _generated(name):
        found.skip(path, "generated")
    elif info.st_size > max_file_bytes:
        found.skip(path, "oversize")
    else:
        found.files.append(FileEntry(path, info.st_size, info.st_mtime_ns))


def _entries(found: Walk, top: str, rules: IgnoreRules,
             excluded: set[str]) -> Iterator[tuple[str, str, os.stat_result]]:
    """(path, name, stat) of every regular file under ``top`` that passes the rules: each folder's
    files in name order, then its sub-folders (a stack, not recursion: depth is the tree's to choose)."""
    pending: list[tuple[str, IgnoreRules]] = [(top, rules)]
    while pending:
        folder, folder_rules = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            found.skip(folder, "unreadable")
            continue
        folders: list[str] = []
        for entry in entries:
            path = os.path.join(folder, entry.name)
            if _bad_name(entry.name):
                found.skip(path, "bad_name")
                continue
            if entry.name.startswith("."):
                found.skip(path, "hidden")
                continue
            try:
                if entry.is_symlink():
                    found.skip(path, "symlink")
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                info = entry.stat(follow_symlinks=False)
            except OSError:
                found.skip(path, "unreadable")
                continue
            if path in excluded:
                found.skip(path, "data_dir")
            elif folder_rules.ignored(path, is_dir):
                found.skip(path, "ignored")
            elif is_dir:
                folders.append(path)
            elif stat.S_ISREG(info.st_mode):
                yield path, entry.name, info
        pending.extend((path, folder_rules.within(path)) for path in reversed(folders))


def read_file(entry: FileEntry, max_file_bytes: int) -> bytes | None:
    """The file's bytes (None: gone, a symlink now, unreadable, or grown past the cap since the walk)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(entry.path, flags)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None  # a FIFO or device swapped in after the walk
        data = file.read(max_file_bytes + 1)
    return data if len(data) <= max_file_bytes else None
