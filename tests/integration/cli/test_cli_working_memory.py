"""``crystalmesh memory note|dream|context`` and ``skill crystallize`` on a data dir (no node running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli, isolate_home


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_home(tmp_path, monkeypatch)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    runner = Cli(capsys, tmp_path / "node")
    assert runner.run("init", "--embedder", "hashing")[0] == 0
    return runner


def test_note_context_dream_context(cli: Cli) -> None:
    noted = cli.json("memory", "note", "User's name is Douglas, prefers tabs", "--importance", "0.8")
    assert noted["importance"] == 0.8 and noted["crystal"] == "indexed"
    code, out, _ = cli.run("memory", "context", "--window", "32000")
    assert code == 0 and "## Unsynthesized Notes (pending dream consolidation)" in out
    assert "(importance: 0.8) User's name is Douglas, prefers tabs" in out
    hits = cli.json("memory", "search", "Douglas tabs")
    assert hits[0]["id"] == noted["crystal_id"]
    code, out, _ = cli.run("memory", "dream")
    assert code == 0 and out.startswith("MEMORY.md written") and "1 scratch notes consumed" in out
    context = cli.json("memory", "context")
    assert "## The Bond (Oxytocin-Weighted)" in context["context"]
    assert "Unsynthesized Notes" not in context["context"]
    assert (cli.data_dir / "memory" / "default" / "MEMORY.md").exists()


def test_mistakes_are_one_line_and_change_nothing(cli: Cli) -> None:
    for args in (["memory", "note", "   "], ["memory", "note", "x" * 4001],
                 ["memory", "context", "--namespace", "../../etc"],
                 ["skill", "crystallize", "no-such-crystal"]):
        code, _out, err = cli.run(*args)
        assert code != 0 and err.startswith("error:") and "Traceback" not in err, (args, err)
    assert cli.run("memory", "note", "x", "--importance", "1.5")[0] == 2  # click's usage error
    scratch = cli.data_dir / "memory" / "default" / "scratch.md"
    assert not scratch.exists() or "importance" not in scratch.read_text()


def test_crystallize_from_the_cli(cli: Cli) -> None:
    pattern = cli.json("memory", "add", "Rotate the staging TLS certificates with certbot",
                       "--type", "task_pattern")
    for _ in range(3):
        cli.json("skill", "record-execution", pattern["id"], "--success", "--reward", "0.9")
    skill = cli.json("skill", "crystallize", pattern["id"][:8], "--category", "ops", "--tag", "tls")
    assert skill["semanticType"] == "skill" and skill["executions"] == 3
    assert skill["skillCategory"] == "ops" and skill["skillTags"] == ["tls"]
    assert skill["text"] == "Skill: Rotate the staging TLS certificates with certbot"


def test_a_directive_note_is_a_directive_in_search(cli: Cli) -> None:
    noted = cli.json("memory", "note", "the user never wants semicolons", "--directive")
    plain = cli.json("memory", "note", "the user asked about semicolons in the linter config")
    hits = {hit["id"]: hit["crystal"] for hit in cli.json("memory", "search", "semicolons")}
    assert hits[noted["crystal_id"]]["semanticType"] == "directive"
    assert hits[noted["crystal_id"]]["epistemicLayer"] == "directive"
    assert hits[plain["crystal_id"]]["epistemicLayer"] == "world_fact"
    assert hits[plain["crystal_id"]]["provenance"] == "own" and hits[plain["crystal_id"]]["seller"] is None


def test_a_dream_reports_its_insights_and_outcomes_report_confidence(cli: Cli) -> None:
    cli.json("memory", "note", "We decided to keep the billing ledger in Postgres")
    code, out, _ = cli.run("memory", "dream")
    assert code == 0 and "dream 1: 1 new insights" in out
    dreamt = cli.json("memory", "dream")
    assert dreamt["dream_count"] == 2 and dreamt["insights"]["created"] == 0
    [insight] = [hit["crystal"] for hit in cli.json("memory", "search", "billing ledger Postgres")
                 if hit["crystal"]["origin"] == "dream"]
    detail = cli.json("memory", "show", insight["id"])
    assert detail["knowledge"]["insight"]["kind"] == "decision" and detail["knowledge"]["confidence"] == 0.3
    skill = cli.json("memory", "add", "Rotate the staging TLS certificates with certbot", "--type", "skill")
    code, out, _ = cli.run("skill", "record-execution", skill["id"], "--failure")
    assert code == 0 and "confidence 1.000 -> 0.800" in out


def test_directive_proposals_from_the_cli(cli: Cli) -> None:
    assert cli.json("memory", "directives", "list")["proposals"] == []
    code, out, _ = cli.run("memory", "directives", "list")
    assert code == 0 and "directive proposals" in out
    for verb in ("confirm", "dismiss"):
        code, _out, err = cli.run("memory", "directives", verb, "0123456789abcdef")
        assert code != 0 and err.startswith("error:") and "Traceback" not in err


def test_a_bought_skills_run_is_evidence_about_its_seller_without_a_node(cli: Cli) -> None:
    """``skill record-execution`` runs the market face's one body (``record_skill_run``) without a
    node too: a bought skill's failure is logged against its seller in the trust ledger."""
    from node.config import load_config
    from node.crystals import SemanticType
    from node.memory import Memory
    from node.trust import Ledger

    seller = "ab" * 32
    memory = Memory(load_config(cli.data_dir))
    try:
        crystal = memory.prepare("to rotate logs run logrotate -f", semantic_type=SemanticType.SKILL)
        crystal.governance.peer_origin = seller
        skill_id = memory.add_crystals([crystal])[0].id
    finally:
        memory.close()
    ran = cli.json("skill", "record-execution", skill_id, "--failure")
    assert ran["executions"] == 1 and ran["successes"] == 0
    memory = Memory(load_config(cli.data_dir))
    try:
        events = Ledger(memory.db).events(seller)
    finally:
        memory.close()
    assert [(event["kind"], event["detail"]) for event in events] == [("execution_failure", skill_id)]
