"""Which files ``memory index`` reads (node.memory.files.folders), on a real folder: .gitignore at
every level (and the repository's above the indexed folder), hidden names, binaries, oversize,
generated files, symlinks, the data dir, hostile names."""

from __future__ import annotations

import os
from pathlib import Path

from node.memory.files import walk


def write(path: Path, text: str | bytes = "some text\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def names(root: Path, **kwargs: object) -> list[str]:
    found = walk(root, **kwargs)  # type: ignore[arg-type]
    return sorted(os.path.relpath(entry.path, root) for entry in found.files)


def test_gitignore_at_every_level_with_git_precedence(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / ".gitignore", "*.log\nbuild/\n/top-only.md\n")
    write(repo / "keep.md")
    write(repo / "debug.log")
    write(repo / "top-only.md")
    write(repo / "docs" / "top-only.md")  # anchored pattern: only at the top
    write(repo / "build" / "out.md")
    write(repo / "docs" / ".gitignore", "!important.log\ndrafts/\n")
    write(repo / "docs" / "important.log")  # re-included by the deeper file
    write(repo / "docs" / "other.log")
    write(repo / "docs" / "drafts" / "wip.md")
    assert names(repo) == ["docs/important.log", "docs/top-only.md", "keep.md"]
    found = walk(repo)
    assert found.skipped["ignored"] == 5 and found.skipped["hidden"] == 3  # .git and two .gitignore
    # Indexing a folder inside the repository: the repository's own .gitignore still applies.
    assert names(repo / "docs") == ["important.log", "top-only.md"]
    assert walk(repo).reason_for(str(repo / "build" / "out.md")) == "ignored"
    assert walk(repo).reason_for(str(repo / "gone.md")) == "deleted"


def test_binaries_oversize_generated_hidden_and_the_data_dir_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "notes.md")
    write(root / "picture.png", b"\x89PNG\r\n")
    write(root / "big.txt", "x" * 2000)
    write(root / "package-lock.json", "{}")
    write(root / "app.min.js", "var a=1")
    write(root / ".env", "SECRET=1")
    write(root / ".claude" / "settings.md")
    write(root / "data" / "crystals.md")
    found = walk(root, max_file_bytes=1000, exclude=[root / "data"])
    assert [os.path.basename(entry.path) for entry in found.files] == ["notes.md"]
    assert dict(found.skipped) == {"binary": 1, "oversize": 1, "generated": 2, "hidden": 2, "data_dir": 1}
    # A hidden file named explicitly is taken.
    assert [entry.path for entry in walk(root / ".env").files] == [str((root / ".env").resolve())]


def test_symlinks_are_never_followed_and_hostile_names_are_skipped(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.md", "not for the index")
    root = tmp_path / "root"
    write(root / "inside.md")
    (root / "link.md").symlink_to(outside)
    (root / "loop").symlink_to(root)
    (root / "dir-link").symlink_to(outside.parent)
    write(root / "bad\nname.md")
    write(Path(os.fsdecode(bytes(root) + b"/latin-\xe9.md")))
    found = walk(root)
    assert [os.path.basename(entry.path) for entry in found.files] == ["inside.md"]
    assert found.skipped["symlink"] == 3 and found.skipped["bad_name"] == 2


def test_a_deep_tree_is_walked_without_recursion(tmp_path: Path) -> None:
    folder = tmp_path / "deep"
    for _ in range(1200):  # deeper than Python's recursion limit
        folder = folder / "d"
    write(folder / "bottom.md")
    try:
        assert len(walk(tmp_path / "deep").files) == 1
    finally:  # taken down here, bottom up: shutil.rmtree (pytest's tmp cleanup) recurses per level
        (folder / "bottom.md").unlink()
        while folder != tmp_path:
            folder.rmdir()
            folder = folder.parent
