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


def test_pin_unpin_explicit_add_and_a_consolidation_preview(initialised: Cli) -> None:
    ordinary = initialised.json("memory", "add", "the lift was serviced in may")
    said = initialised.json("memory", "add", "the user's name is Priya", "--importance", "0.8")
    assert said["governance"]["importanceFloor"] == 0.8
    kept = initialised.json("memory", "add", "the office wifi is cm-guest", "--lifespan", "permanent")
    assert kept["governance"]["lifespanPolicy"] == "permanent"
    note = initialised.json("memory", "note", "the API migration deadline is March 20", "--lifespan", "permanent")
    assert note["crystal"] == "indexed"
    total = initialised.json("memory", "status")["total"]

    preview = initialised.json("memory", "consolidate", "--at", "+90d", "--dry-run")
    assert [item["id"] for item in preview["forgotten"]] == [ordinary["id"]] and preview["dry_run"]
    code, out, _ = initialised.run("memory", "consolidate", "--at", "+90d", "--dry-run")
    assert code == 0 and "would forget" in out and "the lift was serviced" in out
    assert initialised.json("memory", "status")["total"] == total
    assert initialised.json("memory", "show", ordinary["id"])["lifecycle"] == "generated"

    code, out, _ = initialised.run("memory", "pin", ordinary["id"])
    assert code == 0 and "pinned" in out
    assert "already permanent" in initialised.run("memory", "pin", ordinary["id"])[1]
    assert initialised.json("memory", "consolidate", "--at", "+90d", "--dry-run")["forgotten"] == []
    assert initialised.json("memory", "unpin", ordinary["id"])["governance"]["lifespanPolicy"] == "decay"
    shown = initialised.json("memory", "show", ordinary["id"])
    assert [a["action"] for a in shown["audit"] if a["action"] in ("pinned", "unpinned")] == ["unpinned", "pinned"]

    assert "in the past" in initialised.fails("memory", "consolidate", "--at", "2020-01-01")
    assert "neither" in initialised.fails("memory", "consolidate", "--at", "soon")
    assert "not both" in initialised.fails("memory", "consolidate", "--dry-run", "--purge")
    assert initialised.fails("memory", "pin", "no-such-memory").startswith("error: ")
