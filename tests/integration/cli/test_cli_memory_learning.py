"""``crystalmesh memory feedback | session end | export/import --testament | context --budget-tokens``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_feedback_and_session_end(initialised: Cli) -> None:
    added = initialised.json("memory", "add", "the build server is build-07")
    rated = initialised.json("memory", "feedback", added["id"], "wrong")
    assert rated["confidence"] == 0.5
    assert "is not one of" in initialised.run("memory", "feedback", added["id"], "meh")[2]
    assert initialised.fails("memory", "feedback", "no-such-crystal", "useful").startswith("error: ")
    ended = initialised.json("memory", "session", "end")
    assert ended["policy"] == "importance" and "tiers" not in ended
    status = initialised.json("memory", "status")
    assert status["tiers"]["policy"] == "importance" and status["tiers"]["last_session_end_ms"]
    shown = initialised.json("memory", "show", added["id"])
    assert shown["knowledge"]["confidence"] == 0.5 and shown["knowledge"]["provenance"] == "local"
    code, out, _ = initialised.run("memory", "show", added["id"])
    assert code == 0 and "confidence   0.500" in out
    code, out, _ = initialised.run("memory", "status")
    assert code == 0 and "tiers        policy importance" in out


def test_testament_round_trip_and_tampered_file(initialised: Cli, tmp_path: Path) -> None:
    initialised.json("memory", "add", "warning: wallet 0xdead is a honeypot", "--type", "warning")
    file = tmp_path / "t.testament"
    exported = initialised.json("memory", "export", "--testament", str(file))
    assert exported["entries"] == 1 and exported["kinds"] == {"warning": 1}
    heir = Cli(initialised.capsys, tmp_path / "heir")
    heir.json("init", "--embedder", "hashing")
    imported = heir.json("memory", "import", "--testament", str(file))
    assert imported["imported"] == 1 and imported["signer"] == exported["signer"]
    tampered = tmp_path / "bad.testament"
    data = bytearray(file.read_bytes())
    data[-70] ^= 0xFF
    tampered.write_bytes(bytes(data))
    fresh = Cli(initialised.capsys, tmp_path / "fresh")
    fresh.json("init", "--embedder", "hashing")
    assert "testament refused" in fresh.fails("memory", "import", "--testament", str(tampered))
    assert fresh.json("memory", "status")["total"] == 0
    assert "cannot read" in fresh.fails("memory", "import", "--testament", str(tmp_path / "missing"))


def test_budgeted_context(initialised: Cli) -> None:
    initialised.json("memory", "add", "warning: never deploy on friday afternoons", "--type", "warning")
    initialised.json("memory", "add", "deploys go out through the release pipeline")
    result = initialised.json("memory", "context", "--query", "deploy friday", "--budget-tokens", "200")
    assert result["blocks"][0]["kind"] == "warnings"
    assert result["used_tokens"] <= 200
    tiny = initialised.json("memory", "context", "--query", "deploy friday", "--budget-tokens", "5")
    assert tiny["blocks"] == [] and {e["reason"] for e in tiny["evicted"]} == {"over_budget"}
