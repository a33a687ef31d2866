"""The contract of the dual commands: with or without a running node, the same JSON (issue 37).

Every command that works both beside a running node (``ApiClient``) and on a bare data dir
(``node.cli.local.LocalNode``) is run in the same order on two data dirs made alike: one
with no node, one served by a node running in this test. Their JSON answers must be equal
once what legitimately differs between two data dirs is normalised:

* ids (crystals, memories, notes, scratch entries): random per data dir; each distinct id is
  numbered in the order it first appears, so "the same id again" still has to match;
* times (``*At``, ``*_ms``, ``at``, seconds taken, rates): the clock, not the operation;
* the data dir and work folder paths (two temporary folders), and ``signer`` (each data
  dir has its own identity key), and byte sizes of files that embed those;
* floats within 0.001 (importance decays by the seconds between the runs), hormone levels
  (they decay by the clock: only which hormones are reported is compared),
  ``index.state`` (when this process opened the index), and the order of a consolidation's
  ``transitions`` (ordered by random id).

Nothing else is normalised: a key present on one side only, another type, another count or
another text is a broken contract.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from node.api import running_node
from node.config import load_config
from node.init import init_node
from node.service import NodeService
from tests.support.cli import Cli
from tests.support.sessions.conversations import locomo_bytes
from tests.support.sessions.transcripts import SESSION, claude_code_transcript, write_transcript

pytestmark = pytest.mark.usefixtures("isolated_home")

ID = re.compile(r"^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,64})$")
TIME_KEY = re.compile(r"(At|_ms|_at|_s|_per_s)$|^(at|seconds|timestamp|validFrom|validTo)$")
# Values that are bytes of files holding ids, times or a signature (lengths differ by a digit).
SIZE_KEYS = {"bytes"}
# Keys that name the data dir's own identity.
IDENTITY_KEYS = {"signer"}
# (parent key, key) that say how this process opened the store, not what it holds: a node
# loaded or rebuilt its index once at start, each command without a node opens it again.
PROCESS_KEYS = {("index", "state")}
# Levels that decay by the clock between two calls (hormones decay by the second): their keys count.
CLOCK_DICTS = {"hormones"}
# Lists in the order of random ids (two crystals expiring in one cycle): compared as sets.
UNORDERED_KEYS = {"transitions"}


class Normaliser:
    """One run's answers with ids numbered by first appearance, times and paths blanked."""

    def __init__(self, *folders: Path) -> None:
        self.ids: dict[str, str] = {}
        self.folders = sorted((str(folder) for folder in folders), key=len, reverse=True)

    def __call__(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict) and key in CLOCK_DICTS:
            return {k: "<level>" for k in value}
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items() if (key, k) not in PROCESS_KEYS}
        if isinstance(value, list):
            items = [self(item, key) for item in value]
            return sorted(items, key=repr) if key in UNORDERED_KEYS else items
        if key in IDENTITY_KEYS:
            return "<signer>"
        if key in SIZE_KEYS and isinstance(value, int):
            return "<bytes>"
        if TIME_KEY.search(key) and isinstance(value, int | float) and not isinstance(value, bool):
            return "<time>"
        if TIME_KEY.search(key) and isinstance(value, str) and re.match(r"^\d{4}-\d\d-\d\d", value):
            return "<time>"
        if isinstance(value, str):
            return self._text(value)
        return value

    def _text(self, text: str) -> str:
        if ID.match(text):
            return self.ids.setdefault(text, f"<id{len(self.ids)}>")
        for number, folder in enumerate(self.folders):
            text = text.replace(folder, f"<folder{number}>")
        text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?Z?", "<time>", text)
        # An id inside a text (a short id, a pointer in MEMORY.md): number it the same way.
        return re.sub(r"\b[0-9a-f]{32}\b", lambda m: self.ids.setdefault(m.group(0), f"<id{len(self.ids)}>"),
                      text)


def tour(cli: Cli, work: Path) -> list[tuple[str, Any]]:
    """Every dual command once, in an order where each finds what the earlier ones left."""
    answers: list[tuple[str, Any]] = []

    def run(*args: str) -> Any:
        answer = cli.json(*args)
        answers.append((f"#{len(answers)} {args[0]} {args[1]}", answer))
        return answer

    work.mkdir()
    preference = run("memory", "add", "jonas prefers short answers", "--type", "preference",
                     "--namespace", "user:jonas")
    run("memory", "add", "jonas prefers short answers", "--type", "fact", "--namespace", "user:jonas")
    run("memory", "add", "deploy checklist: run the migrations first", "--importance", "0.8")
    pattern = run("memory", "add", "Rotate the staging TLS certificates with certbot", "--type", "task_pattern")
    run("memory", "note", "the user never wants semicolons", "--directive")
    run("memory", "note", "the user never wants semicolons")
    run("memory", "note", "deploy checklist: run the migrations first", "--directive")
    run("memory", "note", "Douglas likes tabs", "--namespace", "agent:coder", "--importance", "0.9")
    run("memory", "search", "semicolons")
    run("memory", "search", "jonas short answers", "--namespace", "user:jonas", "--type", "preference")
    run("memory", "search", "deploy", "--all-namespaces", "--source", "memory")
    run("memory", "show", preference["id"])
    run("memory", "list", "--namespace", "user:jonas")
    updated = run("memory", "update", preference["id"], "jonas prefers very short answers")
    run("memory", "history", updated["id"])
    # A note of what is stored already, asked as another type: "exists", with what differs.
    run("memory", "note", "jonas prefers very short answers", "--namespace", "user:jonas", "--lifespan",
        "permanent")
    run("memory", "pin", updated["id"])
    run("memory", "pin", updated["id"])
    run("memory", "unpin", updated["id"])
    run("memory", "feedback", updated["id"], "useful")
    run("memory", "context", "--window", "32000")
    run("memory", "context", "--query", "deploy", "--budget-tokens", "500")
    run("memory", "dream")
    run("memory", "dream", "--namespace", "agent:coder")
    run("memory", "context")
    run("memory", "directives", "list", "--status", "all")
    for _ in range(3):
        run("skill", "record-execution", pattern["id"], "--success", "--reward", "0.9")
    skill = run("skill", "crystallize", pattern["id"][:8], "--category", "ops", "--tag", "tls")
    run("skill", "new-version", skill["id"], "Skill: Rotate the TLS certificates with certbot renew")
    folder = work / "pg-skill"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: pg-replica-recovery\ndescription: Recover a replica.\n---\n"
                                     "Stop the replica, re-base it from the primary, start it.\n")
    run("skill", "add", str(folder), "--category", "ops", "--tag", "postgres")
    conversation = work / "locomo.json"
    conversation.write_bytes(locomo_bytes())
    run("memory", "ingest", "--conversation", str(conversation))
    hits = run("memory", "search", "charity race", "-k", "2")
    run("memory", "neighbours", hits[0]["id"], "--window", "1")
    transcript = write_transcript(work / f"{SESSION}.jsonl", claude_code_transcript(12))
    run("memory", "ingest", "--transcript", str(transcript))
    run("memory", "ingest", "--transcript", str(transcript))
    notes = work / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text("# Deploy\n\nRun the migrations first.\n\n## Rollback\n\nRevert the tag.\n")
    run("memory", "index", str(notes), "--namespace", "agent:coder")
    run("memory", "index", str(notes), "--namespace", "agent:coder")
    run("memory", "session", "end")
    run("memory", "consolidate", "--dry-run")
    run("memory", "consolidate")
    run("memory", "export", str(work / "backup.jsonl"))
    run("memory", "export", "--testament", str(work / "testament.bin"))
    run("memory", "import", "--testament", str(work / "testament.bin"))
    run("memory", "delete", updated["id"])
    run("memory", "history", updated["id"])
    run("memory", "status")
    return answers


async def test_every_dual_command_answers_the_same_with_and_without_a_node(
        tmp_path: Path, node: NodeService, cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    offline_dir = tmp_path / "offline"
    init_node(offline_dir, name="agent", embedder="hashing")
    # One side answered by LocalNode, the other by the node through ApiClient.
    assert running_node(load_config(offline_dir, environ={})) is None
    served = running_node(node.config)
    assert served is not None
    served.close()
    offline = await trio.to_thread.run_sync(tour, Cli(capsys, offline_dir), tmp_path / "offline-work")
    online = await trio.to_thread.run_sync(tour, Cli(capsys, node.config.data_dir), tmp_path / "online-work")

    without = Normaliser(offline_dir, tmp_path / "offline-work")
    beside = Normaliser(node.config.data_dir, tmp_path / "online-work")
    assert [label for label, _ in offline] == [label for label, _ in online]
    differences = [f"{label}: {difference}"
                   for (label, alone), (_, served) in zip(offline, online, strict=True)
                   for difference in _differences(without(alone), beside(served))]
    assert differences == [], "\n".join(differences)


def _differences(alone: Any, served: Any, where: str = "") -> list[str]:
    """Where two normalised answers differ (a key on one side only, another value)."""
    if isinstance(alone, dict) and isinstance(served, dict):
        found = [f"{where}.{key}: only {'without' if key in alone else 'with'} a node"
                 for key in sorted(alone.keys() ^ served.keys())]
        return found + [d for key in sorted(alone.keys() & served.keys())
                        for d in _differences(alone[key], served[key], f"{where}.{key}")]
    if isinstance(alone, list) and isinstance(served, list) and len(alone) == len(served):
        return [d for index, (a, s) in enumerate(zip(alone, served, strict=True))
                for d in _differences(a, s, f"{where}[{index}]")]
    if isinstance(alone, float) and isinstance(served, float):  # decayed by the seconds between the runs
        return [] if math.isclose(alone, served, abs_tol=1e-3) else [f"{where}: {alone} without a node, {served} with"]
    if isinstance(alone, str) and isinstance(served, str) and alone != served:
        return [f"{where}: {_text_difference(alone, served)}"]
    return [] if alone == served else [f"{where}: {_short(alone)} without a node, {_short(served)} with"]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 160 else text[:157] + "..."


def _text_difference(alone: str, served: str) -> str:
    """Where two texts part: a few characters either side of the first difference."""
    common = min(len(alone), len(served))
    at = next((i for i in range(common) if alone[i] != served[i]), common)
    return (f"from character {at}: {alone[max(0, at - 40):at + 60]!r} without a node, "
            f"{served[max(0, at - 40):at + 60]!r} with")

