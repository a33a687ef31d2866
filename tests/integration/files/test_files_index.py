"""``memory index`` on a real store and index (node.memory.files through ``LocalNode``, as the CLI
runs it without a node): chunks with path and lines, a re-sync that keeps unchanged chunks,
versions an edited one, moves shifted ones, retires removed, ignored and binary files, restores a
deleted or purged chunk, and hostile files that never stop it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from node.cli.local import LocalNode
from node.crystals import LifespanPolicy, Origin, Source
from node.memory import SearchRequest, delete, history
from node.memory.facade import Memory

GUIDE = """\
# Guide

Welcome to the zebracorn handbook.

## Install

Install with the quokkabyte script.

## Rollback

Roll back with the platypod lever.
"""


def index(memory: Memory, *paths: Path) -> dict[str, Any]:
    return LocalNode(lambda: memory).memory_index([str(path) for path in paths])


def rows(memory: Memory) -> dict[tuple[str, str], str]:
    return {(os.path.basename(row[0]), row[1]): row[2] for row in memory.db.all(
        "SELECT path, chunk_key, crystal_id FROM indexed_chunks")}


def found(memory: Memory, query: str) -> list[dict[str, Any]]:
    hits = memory.search(SearchRequest(query, 5, record_access=False))
    return [hit.crystal.to_dict() for hit in hits if query in hit.crystal.text]


def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE)
    (root / "tool.py").write_text("def launch():\n    return 'the narwhalix launcher'\n")
    return root


def test_chunks_carry_path_lines_and_their_source(memory: Memory, tmp_path: Path) -> None:
    root = folder(tmp_path)
    summary = index(memory, root)
    assert summary["files"] | {"skipped": {}} == {"seen": 2, "indexed": 2, "unchanged": 0, "removed": 0,
                                                  "skipped": {}, "replaced": 0}
    assert summary["chunks"]["added"] == 4
    [hit] = found(memory, "quokkabyte")
    assert hit["path"] == str(root.resolve() / "guide.md")
    assert (hit["startLine"], hit["endLine"]) == (5, 8)
    assert hit["text"] == f"{root.resolve()}/guide.md › Guide › Install\n## Install\n\nInstall with the quokkabyte script."
    crystal = memory.get(hit["id"])
    assert crystal.source is Source.FILES and crystal.origin is Origin.INDEXED
    assert crystal.governance.lifespan_policy is LifespanPolicy.PERMANENT
    [code] = found(memory, "narwhalix")
    assert (code["startLine"], code["endLine"]) == (1, 2) and code["text"].split("\n")[0].endswith("tool.py › def launch")


def test_a_resync_keeps_unchanged_chunks_and_versions_only_the_edited_one(memory: Memory, tmp_path: Path) -> None:
    root = folder(tmp_path)
    index(memory, root)
    before = rows(memory)
    again = index(memory, root)
    assert (again["files"]["indexed"], again["files"]["unchanged"]) == (0, 2)  # not even read
    assert rows(memory) == before and memory.store.stats()["total"] == 4

    (root / "guide.md").write_text(GUIDE.replace("platypod lever", "platypod handle"))
    edited = index(memory, root)
    assert edited["chunks"] | {"unchanged": 0} == {"added": 0, "versioned": 1, "unchanged": 0, "relocated": 0,
                                                   "retired": 0}
    after = rows(memory)
    changed = [key for key in before if before[key] != after[key]]
    assert changed == [("guide.md", "Guide › Rollback")]
    past = history(memory, after[changed[0]])
    assert [v["version"] for v in past["versions"]] == [1, 2]
    assert past["versions"][0]["id"] == before[changed[0]] and past["versions"][0]["validTo"] is not None
    assert past["versions"][1]["provenanceDag"][0]["metadata"] == {"reason": "file_changed"}
    assert found(memory, "platypod handle") and not found(memory, "platypod lever")
    for key in before:
        if key != changed[0]:
            assert len(history(memory, before[key])["versions"]) == 1  # untouched: one version


def test_lines_shifted_by_an_edit_above_move_without_a_version(memory: Memory, tmp_path: Path) -> None:
    root = folder(tmp_path)
    index(memory, root)
    before = rows(memory)
    (root / "guide.md").write_text(GUIDE.replace("# Guide\n", "# Guide\n\nA new line.\nAnother one.\n"))
    summary = index(memory, root)
    assert (summary["chunks"]["versioned"], summary["chunks"]["relocated"]) == (1, 2)
    assert rows(memory)[("guide.md", "Guide › Install")] == before[("guide.md", "Guide › Install")]
    [hit] = found(memory, "quokkabyte")
    assert (hit["startLine"], hit["endLine"]) == (8, 11)


def test_removed_ignored_and_binary_files_retire_with_the_reason(memory: Memory, tmp_path: Path) -> None:
    root = folder(tmp_path)
    (root / "draft.md").write_text("# Draft\n\nThe wombatrix plan.\n")
    (root / "data.txt").write_text("The capybarix table.\n")
    index(memory, root)
    ids = rows(memory)
    (root / "tool.py").unlink()
    (root / ".gitignore").write_text("draft.md\n")
    (root / "data.txt").write_bytes(b"\x00\x01binary now")
    summary = index(memory, root)
    assert summary["chunks"]["retired"] == 3 and summary["files"]["removed"] == 3
    for query in ("narwhalix", "wombatrix", "capybarix"):
        assert found(memory, query) == []
    reasons = {name: history(memory, ids[(name, key)])["transitions"][-1]["detail"]["reason"]
               for name, key in (("tool.py", "def launch"), ("draft.md", "Draft"), ("data.txt", "(text)"))}
    assert reasons == {"tool.py": "deleted", "draft.md": "ignored", "data.txt": "binary"}
    assert history(memory, ids[("tool.py", "def launch")])["deleted"] is True
    assert memory.db.one("SELECT COUNT(*) FROM indexed_files")[0] == 1


def test_a_chunk_deleted_or_purged_comes_back_while_the_file_holds_it(memory: Memory, tmp_path: Path) -> None:
    root = folder(tmp_path)
    index(memory, root)
    [hit] = found(memory, "quokkabyte")
    delete(memory, hit["id"])
    assert found(memory, "quokkabyte") == []
    assert index(memory, root)["chunks"]["added"] == 1
    assert found(memory, "quokkabyte")
    memory.consolidate(purge=True)  # purges the tombstoned first copy; its row went with the new one
    [again] = found(memory, "quokkabyte")
    delete(memory, again["id"])
    memory.consolidate()  # the tombstone is purged: the chunk's row goes with it (ON DELETE CASCADE)
    assert index(memory, root)["chunks"]["added"] == 1 and found(memory, "quokkabyte")


def test_hostile_files_are_skipped_or_cleaned_never_fatal(memory: Memory, tmp_path: Path) -> None:
    root = tmp_path / "hostile"
    root.mkdir()
    (root / "latin1.txt").write_bytes(bytes(range(160, 256)) * 20)
    (root / "mostly.md").write_bytes(b"# Mostly\n\nfine text about the ocelotix \xff here\n" + b"more words\n" * 20)
    (root / "ansi.log.txt").write_bytes(b"run \x1b[31mFAILED\x1b[0m with the lynxora flag\x07\n")
    (root / "minified.js").write_text("var a=" + "1+" * 200_000 + "1;")
    summary = index(memory, root)
    assert summary["files"]["skipped"] == {"not_utf8": 1} and summary["files"]["replaced"] == 1
    assert summary["long_lines"] == 1
    [ansi] = found(memory, "lynxora")
    assert "\x1b" not in ansi["text"] and "\x07" not in ansi["text"]
    assert found(memory, "ocelotix")[0]["text"].count("\ufffd") == 1


def test_a_root_covers_its_own_tree_only_and_a_file_can_be_a_root(memory: Memory, tmp_path: Path) -> None:
    notes = folder(tmp_path)
    sibling = tmp_path / "notes_old"  # shares the prefix "notes" and sorts after "notes/"
    sibling.mkdir()
    (sibling / "old.md").write_text("# Old\n\nThe dikdokra archive.\n")
    single = tmp_path / "AGENTS.md"
    single.write_text("# Agents\n\nAsk the serowix first.\n")
    index(memory, notes, sibling, single)
    (notes / "tool.py").unlink()
    assert index(memory, notes)["chunks"]["retired"] == 1  # not the sibling's chunk
    assert found(memory, "dikdokra") and found(memory, "serowix")
    assert index(memory, single)["files"] | {"skipped": {}} == {
        "seen": 1, "indexed": 0, "unchanged": 1, "removed": 0, "skipped": {}, "replaced": 0}


def test_two_identical_sections_are_two_memories_and_version_apart(memory: Memory, tmp_path: Path) -> None:
    root = tmp_path / "twins"
    root.mkdir()
    twin = "## Notes\n\nFeed the quetzalor at noon.\n"
    (root / "log.md").write_text(f"# Log\n\n{twin}\n{twin}")
    assert index(memory, root)["chunks"]["added"] == 2  # "# Log" has no text of its own
    before = rows(memory)
    assert before[("log.md", "Log › Notes")] != before[("log.md", "Log › Notes #2")]
    (root / "log.md").write_text(f"# Log\n\n{twin}\n{twin.replace('noon', 'dusk')}")
    assert index(memory, root)["chunks"]["versioned"] == 1
    after = rows(memory)
    assert after[("log.md", "Log › Notes")] == before[("log.md", "Log › Notes")]
    assert [text.split("\n")[-1] for text in (memory.get(after[("log.md", key)]).text
                                              for key in ("Log › Notes", "Log › Notes #2"))] == [
        "Feed the quetzalor at noon.", "Feed the quetzalor at dusk."]
