"""``crystalmesh memory ingest --conversation`` and ``memory neighbours`` against a temporary data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.sessions.conversations import jsonl_bytes, locomo_bytes

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_ingest_search_neighbours(initialised: Cli, tmp_path: Path) -> None:
    transcript = tmp_path / "locomo.json"
    transcript.write_bytes(locomo_bytes())
    code, out, err = initialised.run("memory", "ingest", "--conversation", str(transcript))
    assert code == 0, err
    assert "7 turns added, 0 already stored, of 7 (2 sessions; Caroline, Melanie)" in out
    assert "embedded 7/7 turns" in err  # progress, on stderr

    hits = initialised.json("memory", "search", "charity race", "-k", "2")
    assert hits[0]["source_id"] == "D1:2" and hits[0]["turn"]["speaker"] == "Melanie"
    code, out, _ = initialised.run("memory", "search", "charity race", "-k", "1")
    assert code == 0 and "source" in out and "D1:2" in out

    around = initialised.json("memory", "neighbours", hits[0]["id"], "--window", "1")
    assert [t["source_id"] for t in around["turns"]] == ["D1:1", "D1:2", "D1:3"]
    code, out, _ = initialised.run("memory", "neighbours", hits[0]["id"], "--window", "1")
    assert code == 0 and "D1:3" in out

    again = initialised.json("memory", "ingest", "--conversation", str(transcript))
    assert (again["added"], again["already_stored"]) == (0, 7)
    assert initialised.json("memory", "status")["total"] == 7


def test_jsonl_into_a_namespace(initialised: Cli, tmp_path: Path) -> None:
    transcript = tmp_path / "standup.jsonl"
    transcript.write_bytes(jsonl_bytes())
    report = initialised.json("memory", "ingest", "--conversation", str(transcript), "--namespace", "team:ops")
    assert report["added"] == 3 and report["namespace"] == "team:ops"
    hits = initialised.json("memory", "search", "flaky migration", "--namespace", "team:ops")
    assert hits[0]["source_id"] == "standup-14:2"


@pytest.mark.parametrize("data", [
    b'[{"speaker": "a", "text": "fine"}, {"speaker": "b", "text": "x\\ud800"}]',
    b"[" * 3000 + b"]" * 3000,
    b'{"speaker_a": "a"}',
    b'[{"speaker": "a", "text": "caf\xe9"}]',
], ids=["surrogate", "deep", "shape", "utf8"])
def test_a_hostile_file_is_one_error_line_and_stores_nothing(initialised: Cli, tmp_path: Path, data: bytes) -> None:
    transcript = tmp_path / "bad.json"
    transcript.write_bytes(data)
    line = initialised.fails("memory", "ingest", "--conversation", str(transcript))
    assert line.startswith("error: ")
    assert initialised.json("memory", "status")["total"] == 0
