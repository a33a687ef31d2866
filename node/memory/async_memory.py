"""trio face of :class:`node.memory.facade.Memory`.

Every call that touches SQLite or the vector index runs through the database
owner's single writer (:meth:`node.db.Database.run`), shared with every other
concept's repository; embedding is CPU work without SQLite and runs on its own
worker thread so it does not hold the writer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Concatenate, ParamSpec, TypeVar

import numpy as np
import trio

from node.crystals import Crystal, CrystalNotFound
from node.db import Database
from node.memory import versions
from node.memory.conversations import attach_turns, embed_plan, neighbours, plan_ingest, store_plan
from node.memory.dynamics import HormonalStateManager
from node.memory.facade import ExecutionOutcome, Memory
from node.memory.files import (
    MAX_DOCUMENT_BYTES,
    Document,
    FileState,
    IndexOptions,
    embed_sync,
    index_paths,
    known_files,
    plan_sync,
    store_sync,
)
from node.memory.portable import export_jsonl
from node.memory.requests import add_from_request
from node.memory.search import SearchHit, SearchRequest, llm_search_steps
from node.memory.transcripts import (
    TranscriptChunk,
    parse_chunk,
    prepare_new,
    select_new,
    start_chunk,
    store_chunk,
    transcript_cursor,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class AsyncMemory:
    """What trio code may do with memory; nothing here reaches past ``Memory``."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    @property
    def db(self) -> Database:
        return self._memory.db

    @property
    def hormones(self) -> HormonalStateManager:
        """The hormonal state (in memory; read from the event loop, saved via ``save_state``)."""
        return self._memory.hormones

    async def run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._memory.db.run(function, *args, **kwargs)

    async def learn(self, operation: Callable[Concatenate[Memory, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a memory-that-learns operation (node.memory.learning_service) on the database's thread."""
        return await self._memory.db.run(operation, self._memory, *args, **kwargs)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await trio.to_thread.run_sync(self._memory.embed, list(texts))

    async def add(self, text: str, **kwargs: Any) -> Crystal:
        crystal = self._memory.prepare(text, **kwargs)
        return await self.add_prepared(crystal)

    async def add_prepared(self, crystal: Crystal) -> Crystal:
        """Store a crystal built elsewhere (a delivered skill); a duplicate returns the stored one."""
        vectors, windows = await trio.to_thread.run_sync(self._memory.embed_windows, [crystal.text])
        results = await self.run(self._memory.add_crystals, [crystal], vectors, windows)
        return await self.run(self._memory.store.get, results[0].id)

    async def add_from_request(self, body: Any) -> Crystal:
        return await self.run(add_from_request, self._memory, body)

    # --- memories as versioned records in namespaces (node.memory.versions) --------------------
    async def add_with_outcome(self, body: Any) -> dict[str, Any]:
        return await self.run(versions.add_memory, self._memory, body)

    async def update(self, crystal_id: str, body: Any) -> dict[str, Any]:
        return await self.run(versions.update_from_request, self._memory, crystal_id, body)

    async def set_lifespan(self, crystal_id: str, lifespan: str) -> dict[str, Any]:
        """Pin (``permanent``) or unpin (``decay``) a memory (:func:`node.memory.versions.set_lifespan`)."""
        return await self.run(versions.set_lifespan, self._memory, crystal_id, lifespan)

    async def delete(self, crystal_id: str) -> dict[str, Any]:
        return await self.run(versions.delete, self._memory, crystal_id)

    async def history(self, crystal_id: str) -> dict[str, Any]:
        return await self.run(versions.history, self._memory, crystal_id)

    async def list_memories(self, namespace: str | None, types: tuple[str, ...],
                            limit: int) -> list[dict[str, Any]]:
        found = await self.run(versions.list_memories, self._memory, namespace, types, limit)
        return [crystal.to_dict() for crystal in found]

    async def list_version(self, namespace: str | None, types: tuple[str, ...], limit: int) -> str:
        return await self.run(versions.list_version, self._memory, namespace, types, limit)

    async def namespaces(self) -> list[dict[str, Any]]:
        return await self.run(self._memory.store.namespaces)

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        llm = self._memory.llm
        if llm is None:
            return await self.run(self._memory.search, request)
        # The LLM calls wait on the network: off the database's single writer.
        steps = llm_search_steps(self._memory, llm, request)
        result: Any = None
        try:
            while True:
                step = steps.send(result)
                if step.on_network:
                    result = await trio.to_thread.run_sync(step.call)
                else:
                    result = await self.run(step.call)
        except StopIteration as done:
            hits: list[SearchHit] = done.value
        await self.run(attach_turns, self._memory, hits)
        return hits

    # --- conversations (node.memory.conversations) ---------------------------------------------
    async def ingest_conversation(self, data: bytes, namespace: str | None = None,
                                  semantic_type: str = "general") -> dict[str, Any]:
        """Store a conversation file's new turns: judged and planned, then embedded off the
        writer, then written in one transaction (nothing is stored if the file is refused)."""
        plan = await self.run(plan_ingest, self._memory, data, namespace, semantic_type)
        plan = await trio.to_thread.run_sync(embed_plan, self._memory, plan)
        return await self.run(store_plan, self._memory, plan)

    async def export_jsonl(self, out_file: IO[bytes]) -> dict[str, Any]:
        """Write the portable export (node.memory.portable) to ``out_file`` in ONE call on the
        database's thread: no write lands between two of its batches, so the file is one state of
        memory (it holds the writer for as long as it takes: ~1 s per 10k crystals here)."""
        return await self.run(export_jsonl, self._memory, out_file)

    # --- session transcripts (node.memory.transcripts) -----------------------------------------
    async def ingest_transcript_chunk(self, chunk: TranscriptChunk) -> dict[str, Any]:
        """Store a chunk of a transcript's lines with its cursor (``ingest_transcript_chunk``'s steps):
        parsed, classified and embedded off the writer, written in one transaction (nothing of it
        if refused or in conflict)."""
        start = await self.run(start_chunk, self._memory, chunk)
        plan = await trio.to_thread.run_sync(parse_chunk, start)
        plan = await self.run(select_new, self._memory, plan)
        plan = await trio.to_thread.run_sync(prepare_new, self._memory, plan)
        return await self.run(store_chunk, self._memory, plan)

    async def transcript_cursor(self, transcript: str, namespace: str | None = None) -> dict[str, Any]:
        """Where the node stopped reading a transcript."""
        return await self.run(transcript_cursor, self._memory, transcript, namespace)

    async def neighbours(self, crystal_id: str, window: int = 2) -> dict[str, Any]:
        """The turns of a session around a conversation turn's memory."""
        return await self.run(neighbours, self._memory, crystal_id, window)

    # --- indexed files (node.memory.files) ----------------------------------------------------
    async def known_files(self, namespace: str | None, root: str) -> dict[str, FileState]:
        """What the index holds of the files under ``root``."""
        return await self.run(known_files, self._memory, namespace, root)

    async def sync_files(self, namespace: str | None, documents: Sequence[Document],
                         removed: dict[str, str]) -> dict[str, Any]:
        """One batch of a re-sync: planned, embedded off the writer, written in one transaction."""
        plan = await self.run(plan_sync, self._memory, namespace, documents, removed)
        plan = await trio.to_thread.run_sync(embed_sync, self._memory, plan)
        return await self.run(store_sync, self._memory, plan)

    async def index_paths(self, roots: Sequence[str | Path], options: IndexOptions) -> dict[str, Any]:
        """Re-sync the operator's own ``memory.index_paths``: read here, in a worker thread, which
        stops between batches when the node shuts down."""
        target = _NodeTarget(self)
        return await trio.to_thread.run_sync(functools.partial(
            index_paths, target, list(roots), options, checkpoint=trio.from_thread.check_cancelled))

    async def index_periodically(self, roots: Sequence[str], options: IndexOptions, interval_s: float) -> None:
        """Keep ``roots`` indexed: a re-sync at start and every ``interval_s``; a failure is logged."""
        while True:
            try:
                summary = await self.index_paths(roots, options)
                chunks = summary["chunks"]
                if chunks["added"] or chunks["versioned"] or chunks["retired"]:
                    log.info("file index synced files=%d added=%d versioned=%d retired=%d seconds=%.2f",
                             summary["files"]["indexed"], chunks["added"], chunks["versioned"],
                             chunks["retired"], summary["seconds"])
            except Exception:
                log.exception("file index sync failed")
            await trio.sleep(interval_s)

    async def get(self, crystal_id: str) -> Crystal:
        """A crystal as the local agent may see it (governance applied)."""
        return await self.run(self._memory.get, crystal_id)

    async def get_stored(self, crystal_id: str) -> Crystal:
        """A crystal as stored, for the node's own use (selling, delivering); a deleted
        memory is gone here too (it is neither sold nor delivered again)."""
        crystal = await self.run(self._memory.store.get, crystal_id)
        if crystal.deleted_at_ms is not None:
            raise CrystalNotFound(crystal_id)
        return crystal

    async def find_by_hash(self, text_hash: str) -> Crystal | None:
        return await self.run(self._memory.store.find_by_hash, text_hash)

    async def detail(self, crystal_id: str, audit_rows: int = 20) -> dict[str, Any]:
        return await self.run(versions.detail, self._memory, crystal_id, audit_rows)

    async def status(self) -> dict[str, Any]:
        return await self.run(self._memory.status)

    async def stats(self) -> dict[str, Any]:
        return await self.run(self._memory.store.stats)

    async def save_periodically(self, interval_s: float) -> None:
        while True:
            await trio.sleep(interval_s)
            await self.save_state()

    async def record_execution(self, crystal_id: str, success: bool, reward: float | None,
                               note: str | None = None) -> ExecutionOutcome:
        return await self.run(self._memory.record_execution, crystal_id, success, reward, note)

    async def new_skill_version(self, crystal_id: str, text: str) -> Crystal:
        return await self.run(self._memory.new_skill_version, crystal_id, text)

    async def ensure_stable_skill_id(self, crystal_id: str) -> Crystal:
        return await self.run(self._memory.ensure_stable_skill_id, crystal_id)

    def local_only(self, crystal: Crystal) -> bool:
        return self._memory.local_only(crystal)

    async def save_state(self) -> None:
        """Persist the index (if it changed) and the hormonal state."""
        memory = self._memory

        def save() -> None:
            if memory.index.dirty:
                memory.index.save()
            memory.save_hormones()

        await self.run(save)

    async def save_hormones(self) -> None:
        await self.run(self._memory.save_hormones)


class _NodeTarget:
    """The node's own memory as an index target, called from the indexing worker thread."""

    max_document_bytes = MAX_DOCUMENT_BYTES

    def __init__(self, memory: AsyncMemory) -> None:
        self._memory = memory

    def known_files(self, namespace: str | None, root: str) -> dict[str, FileState]:
        return trio.from_thread.run(self._memory.known_files, namespace, root)

    def sync_files(self, namespace: str | None, documents: Sequence[Document],
                   removed: dict[str, str]) -> dict[str, Any]:
        return trio.from_thread.run(self._memory.sync_files, namespace, documents, removed)


__all__ = ["AsyncMemory"]
