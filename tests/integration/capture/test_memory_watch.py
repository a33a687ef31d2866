"""``crystalmesh memory watch DIR --once``: a folder of transcripts followed for hosts without hooks."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import Cli
from tests.support.sessions.claude_code import write_session
from tests.support.sessions.transcripts import codex_rollout, write_transcript


def test_watch_ingests_new_and_grown_transcripts_and_nothing_it_must_not(initialised: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    claude = write_session(folder / "-home-dev-project" / "c1.jsonl", "c1",
                           [("user", "Which port does the metrics exporter use?"),
                            ("assistant", "The metrics exporter listens on port 9464.")])
    (folder / "2026" / "11").mkdir(parents=True)
    write_transcript(folder / "2026" / "11" / "rollout-2026-11-02T09-30-00-abc.jsonl", codex_rollout())
    (folder / "secret.jsonl").symlink_to(initialised.data_dir / "api.token")
    (folder / "notes.txt").write_text("not a transcript")

    first = initialised.json("memory", "watch", str(folder), "--once")
    assert (first["files"], first["ingested"], first["failed"]) == (2, 2, 0) and first["added"] > 2
    hits = initialised.json("memory", "search", "metrics exporter port")
    assert hits[0]["turn"]["session"] == "c1"

    write_session(claude, "c1", [("user", "Move it to port 9465 please.")], start_index=2)
    again = initialised.json("memory", "watch", str(folder), "--once")
    assert again["ingested"] == 2 and again["added"] == 1  # a new process: both looked at, one grew
