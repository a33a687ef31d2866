"""``WorkingMemory``: notes, dreams and prompt context for one namespace (seed 001).

Files under ``<data dir>/memory/<namespace>/``: ``scratch.md`` (the WAL),
``MEMORY.md`` (the state), ``dream.journal`` (a committed dream being applied),
``scratch.lock`` / ``dream.lock``, and ``MEMORY.md.seed-backup`` after a seed
migration.

A dream commits through a journal, so that "index and clear" is atomic under
kill -9: the consumed notes are first made crystals (idempotent: dedup by
content hash), then one fsynced rename of ``dream.journal`` (new MEMORY.md +
consumed note ids) is the commit point; applying it (replace MEMORY.md, drop
the consumed lines from the scratch, record the dream time, remove the
journal) is idempotent and is redone by whoever next takes the scratch lock.
Before the commit point nothing visible changed; after it, the dream happens.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.crystals import SemanticType, now_ms
from node.memory.learning import InsightReport, ProposalNotFound, extract
from node.memory.namespaces import DEFAULT_NAMESPACE, validate_namespace
from node.memory.working.auto import auto_note_text
from node.memory.working.backend import MemoryBackend, NoteKind
from node.memory.working.context import working_memory_block
from node.memory.working.dream import (
    ExtractiveSynthesiser,
    NicheData,
    Synthesiser,
    SynthesisInput,
    detect_emerging,
    first_dream_since,
)
from node.memory.working.durable import UnsafeFile, atomic_write, file_lock, fsync_dir, read_bytes
from node.memory.working.journal import read_journal, seal_journal
from node.memory.working.migration import chunk_markdown
from node.memory.working.scratch import DEFAULT_IMPORTANCE, ScratchBuffer, ScratchNote
from node.memory.working.state import TITLE, collapse_reason

log = logging.getLogger(__name__)

MIN_CHUNKS_FOR_DREAM = 5
MAX_STATE_BYTES = 1024 * 1024
AUTO_IMPORTANCE = 0.8
DIRECTIVE_IMPORTANCE = 0.9
"""A directive the user adopted from a proposal: as important as a note they wrote about it."""


def check_namespace(namespace: str) -> str:
    """A namespace name (node.memory.namespaces), also safe as one directory name."""
    return validate_namespace(namespace)


@dataclass
class NoteResult:
    note: ScratchNote
    crystal_id: str | None
    crystal_status: str  # "indexed"; "exists" (same text already a crystal); "pending" (next dream)
    differs: dict[str, dict[str, str]] = field(default_factory=dict)
    held: bool = False  # an existing crystal's importance floor rose to the note's

    def to_dict(self) -> dict[str, Any]:
        return self.note.to_dict() | {"crystal_id": self.crystal_id, "crystal": self.crystal_status} | (
            {"differs": self.differs} if self.differs else {}) | ({"held": True} if self.held else {})


@dataclass
class DreamResult:
    status: str  # "written", "rejected", "skipped" or "busy"
    reason: str | None = None
    synthesiser: str | None = None
    consumed_notes: int = 0
    new_crystals: int = 0
    pointers: list[dict[str, Any]] = field(default_factory=list)
    state_chars: int = 0
    insights: dict[str, Any] = field(default_factory=dict)  # node.memory.learning.dreaming.InsightReport
    dream_count: int | None = None  # seed 000's dreamCount of this namespace, once written
    last_dreamed_at_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class WorkingMemory:
    def __init__(self, data_dir: Path, backend: MemoryBackend, namespace: str = DEFAULT_NAMESPACE,
                 synthesiser: Synthesiser | None = None, min_chunks: int = MIN_CHUNKS_FOR_DREAM,
                 niche: Callable[[], NicheData | None] | None = None,
                 clock: Callable[[], int] = now_ms) -> None:
        self.namespace = check_namespace(namespace)
        if backend.namespace != self.namespace:
            raise ValueError(f"backend for {backend.namespace!r} used for namespace {self.namespace!r}")
        self.directory = Path(data_dir) / "memory" / namespace
        self.backend = backend
        self.synthesiser: Synthesiser = synthesiser or ExtractiveSynthesiser()
        self.min_chunks = min_chunks
        self.niche = niche
        self.clock = clock
        self.scratch = ScratchBuffer(self.directory)
        self.state_path = self.directory / "MEMORY.md"
        self.backup_path = self.directory / "MEMORY.md.seed-backup"
        self.journal_path = self.directory / "dream.journal"
        self.dream_lock_path = self.directory / "dream.lock"
        self.crystal_path = f"memory/{namespace}/scratch.md"
        self._activated = False

    def _meta_key(self, name: str) -> str:
        return f"working_memory:{self.namespace}:{name}"

    # --- notes -------------------------------------------------------------------------------
    def note(self, text: str, importance: float = DEFAULT_IMPORTANCE,
             kind: NoteKind | None = None) -> NoteResult:
        """``working_memory_note``: durable in the scratch before it returns, then a crystal."""
        note = self.scratch.new_note(text, importance, self.clock())
        self.activate()
        existing = self.backend.existing_note(note.text, kind)
        if existing is not None:  # already remembered: no new line or crystal (as ``memory add``)
            # ...but now it was said on purpose: it lasts like a note (its floor rises, audited).
            held = not note.auto and self.backend.hold(existing.id, note.importance)
            return NoteResult(note, existing.id, "exists", existing.differs, held)
        with self.scratch.locked():
            self._recover_locked()
            self.scratch.append_locked(note)
        try:
            crystal = self.backend.note_crystal(note, self.crystal_path, kind)
        except Exception:  # the note is safe in the WAL; the next dream indexes it
            log.exception("working memory: note %s is saved but not yet searchable", note.id)
            return NoteResult(note, None, "pending")
        return NoteResult(note, crystal.id, "indexed" if crystal.created else "exists", crystal.differs)

    def auto_scratch(self) -> list[NoteResult]:
        """Seed's belt and suspenders: one ``[AUTO]`` note per hormone above 0.7."""
        levels = self.backend.hormones()
        notes = []
        for hormone in levels.spikes():
            text = auto_note_text(hormone, getattr(levels, hormone), self.backend.latest_tagged(hormone))
            notes.append(self.note(text, AUTO_IMPORTANCE))
        return notes

    def pending_notes(self) -> list[ScratchNote]:
        with self.scratch.locked():
            self._recover_locked()
            return self.scratch.read_locked().notes

    # --- state -------------------------------------------------------------------------------
    def read_state(self) -> str:
        data = read_bytes(self.state_path, MAX_STATE_BYTES)
        return data.decode("utf-8", errors="replace") if data else ""

    def context(self, window_tokens: int | None = None) -> str:
        """MEMORY.md and pending notes for a system prompt, sized for ``window_tokens``."""
        self.activate()
        with self.scratch.locked():
            self._recover_locked()
            notes = self.scratch.read_locked().notes
            state = self.read_state()
        return working_memory_block(state, notes, window_tokens)

    def activate(self) -> dict[str, Any]:
        """Seed migration, once per namespace (flag in the meta table); first note, context or dream."""
        flag = self._meta_key("seeded")
        if self._activated or self.backend.get_meta(flag):
            self._activated = True
            return {"migrated": False, "reason": "already activated"}
        with self.scratch.locked():
            text = self.read_state()
            result: dict[str, Any] = {"migrated": False, "chunks": 0}
            if text.strip() and not any(line.strip() == TITLE for line in text.splitlines()):
                if not self.backup_path.exists():
                    atomic_write(self.backup_path, text.encode("utf-8"))
                chunks = chunk_markdown(text)
                created = self.backend.add_seed_chunks(chunks, f"memory/{self.namespace}/MEMORY.md")
                result = {"migrated": True, "chunks": len(chunks), "created": created}
                log.info("working memory: migrated a hand-written MEMORY.md into %d crystals", len(chunks))
            self.backend.set_meta(flag, json.dumps(result | {"at_ms": self.clock()}))
        self._activated = True
        return result

    # --- dream -------------------------------------------------------------------------------
    def dream(self, force: bool = True) -> DreamResult:
        """One state update. ``force=False`` (the schedule) needs ``min_chunks`` new items."""
        with self.scratch.locked():
            self._recover_locked()
        with file_lock(self.dream_lock_path, blocking=False) as acquired:
            if not acquired:
                return DreamResult("busy", "another dream is running")
            return self._dream(force)

    def _dream(self, force: bool) -> DreamResult:
        self.activate()
        with self.scratch.locked():
            notes = self.scratch.read_locked().notes
        note_crystals = {note.id: self.backend.note_crystal(note, self.crystal_path).id for note in notes}
        last = self.backend.get_meta(self._meta_key("last_dream_ms"))
        last_dream_ms = int(last) if last and last.isdigit() else None
        views, new_ids = self.backend.snapshot(first_dream_since(last_dream_ms, self.clock()))
        material = len(new_ids | set(note_crystals.values()))
        if not force and material < self.min_chunks:
            return DreamResult("skipped", f"{material} new items, fewer than {self.min_chunks}")
        insights = self._insights()
        if insights.created:  # the dream's own insights feed its state update (seed 001)
            views, new_ids = self.backend.snapshot(first_dream_since(last_dream_ms, self.clock()))
        old_state = self.read_state()
        data = SynthesisInput(
            old_state=old_state, notes=notes, crystals=views, new_crystal_ids=new_ids,
            hormones=self.backend.hormones(), now_ms=self.clock(), last_dream_ms=last_dream_ms,
            niche=self._niche(), emerging=detect_emerging(views),
            note_crystal_ids=note_crystals)
        synthesis = self.synthesiser.synthesise(data, self.backend.search_ids)
        result = DreamResult("written", synthesis.fallback_reason, synthesis.synthesiser, len(notes),
                             len(new_ids), [{"topic": p.topic, "keywords": p.keywords,
                                             "source_ids": list(p.source_ids)} for p in synthesis.pointers],
                             len(synthesis.text), insights.to_dict())
        reason = collapse_reason(synthesis.text, old_state or None)
        if reason is not None:
            log.warning("dream rejected (%s): MEMORY.md and the scratch are unchanged", reason)
            self.backend.set_meta(self._meta_key("last_rejection"),
                                  json.dumps({"at_ms": data.now_ms, "reason": reason}))
            result.status, result.reason = "rejected", reason
            return result
        count = self.backend.get_meta(self._meta_key("dream_count"))
        dream_count = (int(count) if count and count.isdigit() else 0) + 1
        journal = {"version": 1, "state": synthesis.text, "consumed": sorted(note_crystals),
                   "dream_ms": data.now_ms, "dream_count": dream_count}
        with self.scratch.locked():
            self._commit_locked(journal)
        result.dream_count, result.last_dreamed_at_ms = dream_count, data.now_ms
        return result

    def _insights(self) -> InsightReport:
        """Seed 001/003: facts, preferences, decisions and open questions of the new sessions and
        notes as insight crystals linked to their sources (``node.memory.learning.dreaming``);
        the synthesiser may classify them (the LLM one: type, layer, directive proposals)."""
        material = self.backend.insight_material()
        candidates = extract(material.sources)
        classified = self.synthesiser.classify(candidates)
        return self.backend.store_insights(material, candidates, classified.classes, self.clock(), classified.by)

    # --- directive proposals -----------------------------------------------------------------
    def proposals(self, status: str | None = "pending") -> list[dict[str, Any]]:
        """Directives a dream's LLM proposed for this namespace (``pending`` until the user decides)."""
        return self.backend.proposals(status)

    def decide_proposal(self, proposal_id: str, adopt: bool) -> dict[str, Any]:
        """The user's answer to a proposal. Adopting writes the directive as ``memory note
        --directive`` does (durable in the scratch, then a ``directive`` crystal); dismissing
        writes nothing but the decision. Nothing becomes a directive any other way."""
        proposal = self.backend.proposal(proposal_id)
        if proposal["status"] != "pending":
            raise ProposalNotFound(f"directive proposal {proposal_id!r} was already {proposal['status']}")
        note: dict[str, Any] | None = None
        crystal_id: str | None = None
        if adopt:
            directive = NoteKind(SemanticType.DIRECTIVE)
            written = self.note(proposal["text"], DIRECTIVE_IMPORTANCE, directive)
            if written.crystal_status == "exists" and "type" in written.differs:
                # the statement is already a memory of another type: the directive says so itself
                written = self.note(f"Directive: {proposal['text']}", DIRECTIVE_IMPORTANCE, directive)
            note, crystal_id = written.to_dict(), written.crystal_id
        status = "adopted" if adopt else "dismissed"
        self.backend.decide_proposal(proposal_id, status, self.clock(), crystal_id)
        return proposal | {"status": status, "crystal_id": crystal_id, "note": note}

    def _niche(self) -> NicheData | None:
        if self.niche is None:
            return None
        return self.backend.call(self.niche)

    # --- journal -----------------------------------------------------------------------------
    def _commit_locked(self, journal: dict[str, Any]) -> None:
        atomic_write(self.journal_path, seal_journal(journal))  # the commit point
        self._apply_locked(journal)

    def _apply_locked(self, journal: dict[str, Any]) -> None:
        atomic_write(self.state_path, str(journal["state"]).encode("utf-8"))
        self.scratch.remove_locked(journal["consumed"])
        self.backend.set_meta(self._meta_key("last_dream_ms"), str(int(journal["dream_ms"])))
        if isinstance(journal.get("dream_count"), int):  # seed 000's dreamCount, idempotent on a redo
            self.backend.set_meta(self._meta_key("dream_count"), str(journal["dream_count"]))
        os.unlink(self.journal_path)
        fsync_dir(self.directory)

    def _recover_locked(self) -> None:
        """Finish a dream that committed but was interrupted; drop a journal that is not sound."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / "MEMORY.md.tmp")
        try:
            journal = read_journal(self.journal_path, 4 * MAX_STATE_BYTES)
            if journal is None:
                return
        except (ValueError, KeyError, TypeError, AttributeError, UnsafeFile) as error:
            log.error("working memory: discarding an unsound dream journal (%s)", error)
            os.replace(self.journal_path, self.journal_path.with_name("dream.journal.rejected"))
            fsync_dir(self.directory)
            return
        log.warning("working memory: finishing a dream interrupted after its commit")
        self._apply_locked(journal)
