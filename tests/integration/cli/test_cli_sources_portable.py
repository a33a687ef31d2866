"""``memory search --source``, ``memory context --source``, every hit's origin, and ``memory export --format
jsonl`` / ``memory import`` between two temporary data dirs, through the real CLI."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.sessions.conversations import locomo_bytes

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def filled(initialised: Cli, tmp_path: Path) -> Cli:
    conversation = tmp_path / "locomo.json"
    conversation.write_bytes(locomo_bytes())
    assert initialised.run("memory", "ingest", "--conversation", str(conversation))[0] == 0
    initialised.json("memory", "add", "Melanie's race raised money for a mental health charity")
    initialised.json("memory", "add", "Skill: plan a charity race in four steps", "--type", "skill",
                     "--scope", "private")
    return initialised


def test_search_by_source_with_origins(filled: Cli) -> None:
    sessions = filled.json("memory", "search", "charity race", "--source", "sessions")
    assert sessions and {hit["crystal"]["source"] for hit in sessions} == {"sessions"}
    assert sessions[0]["origin"]["source"] == "session" and sessions[0]["origin"]["speaker"] == "Melanie"
    skills = filled.json("memory", "search", "charity race", "--source", "skills")
    assert [hit["origin"]["source"] for hit in skills] == ["skill"]
    both = filled.json("memory", "search", "charity race", "--source", "skills", "--source", "memory")
    assert {hit["origin"]["source"] for hit in both} == {"skill", "memory"}

    code, out, _ = filled.run("memory", "search", "charity race", "--source", "sessions", "-k", "1")
    assert code == 0 and "origin" in out and "session " in out and "#1 2023-05-08" in out

    error = filled.fails("memory", "search", "charity race", "--source", "session")
    assert "unknown source 'session'" in error and "sessions" in error


def test_budgeted_context_by_source(filled: Cli) -> None:
    result = filled.json("memory", "context", "--query", "charity race", "--budget-tokens", "2000",
                         "--source", "skills")
    items = [item for block in result["blocks"] for item in block["items"] if item["id"] != "working-memory"]
    assert items and {item["origin"]["source"] for item in items} == {"skill"}
    assert "unknown source" in filled.fails("memory", "context", "--query", "race", "--budget-tokens", "100",
                                            "--source", "disk")


def test_export_then_import_into_a_fresh_data_dir(filled: Cli, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "memory.jsonl"
    result = filled.json("memory", "export", "--format", "jsonl", str(exported))
    assert result["crystals"] == 9 and result["path"] == str(exported)
    assert stat.S_IMODE(exported.stat().st_mode) == 0o600
    before = filled.json("memory", "search", "charity race", "-k", "10")

    fresh = Cli(capsys, tmp_path / "fresh")
    assert fresh.run("init", "--embedder", "hashing")[0] == 0
    restored = fresh.json("memory", "import", str(exported))
    assert (restored["imported"], restored["vectors"]) == (9, "file")
    after = fresh.json("memory", "search", "charity race", "-k", "10")
    assert [(hit["id"], hit["origin"]) for hit in after] == [(hit["id"], hit["origin"]) for hit in before]
    code, out, _ = fresh.run("memory", "import", str(exported))
    assert code == 0 and "restored 0 crystals of 9" in out and "9 already here" in out

    plain = tmp_path / "notes.txt"  # plain text lines keep their old meaning
    plain.write_text("one note per line\n\nanother note\n")
    assert fresh.json("memory", "import", str(plain)) == {"lines": 2, "created": 2}

    truncated = tmp_path / "cut.jsonl"
    truncated.write_bytes(b"\n".join(exported.read_bytes().splitlines()[:4]) + b"\n")
    assert "nothing imported" in fresh.fails("memory", "import", str(truncated))
    assert "memory export needs FILE" in fresh.fails("memory", "export")
    assert "cannot write" in fresh.fails("memory", "export", str(tmp_path / "missing" / "x.jsonl"))
    assert "not both" in fresh.fails("memory", "export", str(exported), "--testament", str(tmp_path / "t"))
