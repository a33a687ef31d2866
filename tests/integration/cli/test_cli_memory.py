"""``crystalmesh init`` and ``crystalmesh memory ...`` against a temporary data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Cli

REPO = Path(__file__).resolve().parents[3]
CRYSTALMESH = Path(sys.executable).parent / "crystalmesh"


pytestmark = pytest.mark.usefixtures("isolated_home")


def test_init_writes_the_data_dir(initialised: Cli, isolated_home: Path) -> None:
    assert (initialised.data_dir / "node.toml").exists()
    assert 'embedder = "hashing"' in (initialised.data_dir / "node.toml").read_text()
    assert not isolated_home.exists()
    again = initialised.json("init")
    assert not again["created"]


def test_add_search_show_round_trip(initialised: Cli) -> None:
    added = initialised.json("memory", "add", "the release checklist lives in docs/release.md")
    assert len(added["id"]) == 36
    assert added["governance"]["accessScope"] == "private"

    hits = initialised.json("memory", "search", "release checklist")
    assert [hit["id"] for hit in hits] == [added["id"]]
    assert hits[0]["crystal"]["text"] == "the release checklist lives in docs/release.md"

    assert 0.0 <= hits[0]["relevance"] <= 1.0
    assert initialised.json("memory", "search", "release checklist", "--min-relevance", "1") == []
    code, _, err = initialised.run("memory", "search", "release checklist", "--min-relevance", "2")
    assert code != 0 and "--min-relevance" in err and "Traceback" not in err

    shown = initialised.json("memory", "show", added["id"][:8])
    assert shown["id"] == added["id"]
    assert shown["accessCount"] == 1  # the search above touched it
    assert [entry["action"] for entry in shown["audit"]] == ["created"]


def test_json_flag_works_before_and_after_the_subcommand(initialised: Cli) -> None:
    code, out, _ = initialised.run("--json", "memory", "add", "global flag")
    assert code == 0 and "id" in json.loads(out)
    code, out, _ = initialised.run("memory", "add", "per-command flag", "--json")
    assert code == 0 and "id" in json.loads(out)


def test_human_output(initialised: Cli) -> None:
    code, out, _ = initialised.run("memory", "search", "anything")
    assert code == 0 and "no matches" in out
    code, out, _ = initialised.run("memory", "add", "human readable output please")
    assert code == 0
    assert "scope=private" in out and "sensitivity=normal" in out
    code, out, _ = initialised.run("memory", "search", "human readable")
    assert code == 0 and "human readable output" in out
    code, out, _ = initialised.run("memory", "status")
    assert code == 0 and "crystals     1" in out


def test_scope_public_cannot_loosen_a_secret(initialised: Cli) -> None:
    secret = initialised.json(
        "memory", "add", "--scope", "public", "my api key is sk-live-4eC39HqLyjWDarjtT1zdp7dc"
    )
    assert secret["governance"]["accessScope"] == "confidential"
    assert secret["governance"]["sensitivity"] == "confidential"
    plain = initialised.json("memory", "add", "--scope", "public", "the office is on floor 3")
    assert plain["governance"]["accessScope"] == "public"


def test_search_filters_and_limit(initialised: Cli) -> None:
    initialised.json("memory", "add", "--type", "fact", "coffee machine is on floor 2")
    skill = initialised.json(
        "memory", "add", "--type", "skill", "--tag", "kitchen", "--category", "office",
        "descale the coffee machine monthly",
    )
    assert skill["skillTags"] == ["kitchen"] and skill["skillCategory"] == "office"
    hits = initialised.json("memory", "search", "coffee machine", "--type", "skill")
    assert [hit["id"] for hit in hits] == [skill["id"]]
    assert len(initialised.json("memory", "search", "coffee machine", "-k", "1")) == 1


def test_status_consolidate_and_import(initialised: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("first imported line\n\n  second imported line \nfirst imported line\n")
    assert initialised.json("memory", "import", str(notes)) == {"lines": 3, "created": 2}
    status = initialised.json("memory", "status")
    assert status["total"] == 2
    assert status["index"]["vectors"] == 2
    assert status["embedder"] == "hashing-384"
    report = initialised.json("memory", "consolidate", "--purge")
    assert report["scored"] == 2 and report["purged"] == 0


def test_uninitialised_data_dir(cli: Cli) -> None:
    line = cli.fails("memory", "add", "hello")
    assert "is not initialised" in line and "crystalmesh init" in line
    assert not (cli.data_dir / "crystals.db").exists()
    cli.fails("memory", "search", "hello")
    cli.fails("memory", "status")


def test_unknown_crystal_id(initialised: Cli) -> None:
    line = initialised.fails("memory", "show", "00000000-0000-0000-0000-000000000000")
    assert "no crystal with id" in line


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_query(initialised: Cli, query: str) -> None:
    assert "empty search query" in initialised.fails("memory", "search", query)


def test_empty_text(initialised: Cli) -> None:
    assert "text must be a non-empty string" in initialised.fails("memory", "add", "  ")
    assert initialised.json("memory", "status")["total"] == 0


def test_bad_option_value(initialised: Cli) -> None:
    code, _, err = initialised.run("memory", "add", "--type", "nonsense", "x")
    assert code != 0 and "Traceback" not in err and "nonsense" in err


def test_installed_entry_point(cli: Cli, isolated_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTALMESH_")}
    env["CRYSTALMESH_HOME"] = str(isolated_home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CRYSTALMESH), "--data-dir", str(cli.data_dir), *args],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
        )

    missing = run("memory", "show", "abcd")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [missing.stderr.strip()]
    assert missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr
    cli.json("init", "--embedder", "hashing")
    added = run("memory", "add", "--json", "subprocess crystal")
    assert added.returncode == 0, added.stderr
    crystal_id = json.loads(added.stdout)["id"]
    found = run("--json", "memory", "search", "subprocess")
    assert [hit["id"] for hit in json.loads(found.stdout)] == [crystal_id]
    assert not isolated_home.exists()


# --- namespaces, versions, skill folders (issue 14) ---------------------------------------------
SKILL_MD = "---\nname: pg-replica\ndescription: Recover a wedged Postgres replica.\n---\nStop it, resync it."


def test_namespaced_memory_lifecycle(initialised: Cli) -> None:
    cli = initialised
    jonas = cli.json("memory", "add", "Jonas drinks dark roast", "--namespace", "user:jonas")
    assert jonas["outcome"] == "created" and jonas["namespace"] == "user:jonas"
    again = cli.json("memory", "add", "Jonas drinks dark roast", "--namespace", "user:jonas",
                     "--scope", "public")
    assert again["outcome"] == "exists" and again["id"] == jonas["id"]
    assert again["differs"]["scope"]["requested"] == "public"
    code, out, _ = cli.run("memory", "add", "Jonas drinks dark roast", "--namespace", "user:jonas",
                           "--scope", "public")
    assert code == 0 and "already stored" in out and "memory update" in out
    other = cli.json("memory", "add", "Jonas drinks dark roast", "--namespace", "agent:barista")
    assert other["outcome"] == "created" and other["id"] != jonas["id"]

    assert [h["id"] for h in cli.json("memory", "search", "roast", "--namespace", "user:jonas")] == [jonas["id"]]
    assert cli.json("memory", "search", "roast") == []  # the default namespace holds nothing
    assert len(cli.json("memory", "search", "roast", "--all-namespaces")) == 2

    updated = cli.json("memory", "update", jonas["id"], "Jonas switched to green tea")
    assert updated["version"] == 2 and updated["previousId"] == jonas["id"]
    listed = cli.json("memory", "list", "--namespace", "user:jonas")
    assert [c["id"] for c in listed] == [updated["id"]]
    history = cli.json("memory", "history", jonas["id"])
    assert [v["version"] for v in history["versions"]] == [1, 2]
    assert history["versions"][0]["validTo"] == updated["validFrom"]

    deleted = cli.json("memory", "delete", updated["id"])
    assert deleted["versions"] == 2
    assert cli.json("memory", "list", "--namespace", "user:jonas") == []
    assert "no crystal" in cli.fails("memory", "show", updated["id"])
    assert cli.json("memory", "history", jonas["id"])["deleted"] is True
    assert "is not a namespace" in cli.fails("memory", "add", "x", "--namespace", "User:Evil/..")
    assert "give the new TEXT" in cli.fails("memory", "update", other["id"])


def test_skill_add_reads_a_skill_folder(initialised: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "pg-replica"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "scripts" / "resync.sh").write_text("pg_basebackup -D /var/lib/pg\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("ignored")
    added = initialised.json("skill", "add", str(folder), "--category", "ops")
    assert added["skill_name"] == "pg-replica" and added["resources"] == ["scripts/resync.sh"]
    assert added["semanticType"] == "skill" and added["text"].startswith("---\nname: pg-replica")
    # A published name that is no slug is kept in the front matter and the skill named by its slug
    # (issue 39); a name that is a path is refused.
    (folder / "SKILL.md").write_text("---\nname: PDF Tools (beta)\ndescription: x\n---\nbody")
    assert initialised.json("skill", "add", str(folder))["skill_name"] == "pdf-tools-beta"
    (folder / "SKILL.md").write_text("---\nname: ../../evil\ndescription: x\n---\nbody")
    assert "not a path" in initialised.fails("skill", "add", str(folder))
    # More than the old 16 files (references/ of a real skill), within the wire limits.
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "references").mkdir()
    for index in range(20):
        (folder / "references" / f"note-{index}.md").write_text(f"note {index}\n")
    assert len(initialised.json("skill", "add", str(folder))["resources"]) == 21
    # What a bundle cannot carry is named, with what to do.
    (folder / "references" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x01")
    assert "carries text files only" in initialised.fails("skill", "add", str(folder))


def test_skill_add_takes_real_sized_and_clawhub_skills(initialised: Cli, tmp_path: Path) -> None:
    """Issue 39: a skill of about 150 KB (over the old 64 KiB bundle) is stored whole; one over
    192 KiB is refused with the limits; ClawHub's SKILL.md without front matter gets its front
    matter from _meta.json, and the user is told; without _meta.json the refusal says what to add."""
    folder = tmp_path / "large"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    for index in range(3):
        (folder / "references" / f"part-{index}.md").write_text(f"reference line {index}\n" * 3000)
    added = initialised.json("skill", "add", str(folder))
    assert len(added["text"].encode()) > 140 * 1024 and added["front_matter_built"] is None
    (folder / "references" / "part-3.md").write_text("reference line 3\n" * 3000)
    refused = initialised.fails("skill", "add", str(folder))
    assert "196608 bytes" in refused and "131072 bytes" in refused

    clawhub = tmp_path / "pihole"
    clawhub.mkdir()
    (clawhub / "SKILL.md").write_text("# Pi-hole Skill\n\nControl your Pi-hole DNS ad blocker.\n\n## Setup\n")
    (clawhub / "_meta.json").write_text('{"owner": "baanish", "slug": "pihole", "displayName": "Pi-hole Control",'
                                        ' "latest": {"version": "2.0.1"}, "history": []}')
    code, out, err = initialised.run("skill", "add", str(clawhub))
    assert code == 0 and "skill pihole" in out
    assert "SKILL.md had no front matter: built name 'pihole' from _meta.json" in err
    added = initialised.json("skill", "add", str(clawhub))
    assert added["text"].startswith("---\nname: pihole\ndescription: Control your Pi-hole DNS ad blocker.\n")
    assert "_meta.json" in added["front_matter_built"]
    (clawhub / "_meta.json").unlink()
    refused = initialised.fails("skill", "add", str(clawhub))
    assert 'SKILL.md has no front matter: add front matter, four lines at the top of SKILL.md: "---"' in refused
