"""The session-start context read from the files alone (node.memory.working.bootstrap), with a
dream that committed its journal but was not applied yet: shown as it will be once applied,
and a journal that is not sound (edited, nested past its depth) is not shown at all."""

from __future__ import annotations

import json

from node.config import NodeConfig
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend
from node.memory.working.bootstrap import bootstrap_context
from node.memory.working.journal import seal_journal
from node.memory.working.working import WorkingMemory


def test_a_committed_dream_is_shown_applied_and_an_unsound_journal_not_at_all(
        memory: Memory, node_config: NodeConfig) -> None:
    working = WorkingMemory(node_config.data_dir, MemoryBackend(memory))
    kept = working.note("the staging key was rotated on monday").note
    consumed = working.note("priya owns the api migration").note
    directory = node_config.data_dir / "memory" / "default"
    before = bootstrap_context(node_config.data_dir, "default")
    assert kept.text in before and consumed.text in before

    journal = directory / "dream.journal"
    state = "# Working Memory State\n\n## Active Context\n\nPriya owns the API migration.\n"
    journal.write_bytes(seal_journal({"state": state, "consumed": [consumed.id], "dream_ms": 1}))
    shown = bootstrap_context(node_config.data_dir, "default")
    assert "Priya owns the API migration." in shown
    assert kept.text in shown and consumed.text not in shown

    sealed = json.loads(journal.read_bytes())
    sealed["journal"] = sealed["journal"].replace("Priya", "Mallory")  # edited after sealing
    journal.write_text(json.dumps(sealed))
    assert bootstrap_context(node_config.data_dir, "default") == before
    journal.write_bytes(b'{"sha256": "00", "journal": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert bootstrap_context(node_config.data_dir, "default") == before
