"""The node's async face of working memory (seed 001): what the API routes and the schedule call.

``NodeService`` mixes this in; it needs the service's ``config``, ``memory``
(its ``AsyncMemory``, whose ``run`` is the database's single writer) and may
set ``niche_source`` (the market's economics for The Niche).

Working-memory operations block (fsync, file locks, maybe an LLM call), so
they run on their own worker thread; each store access inside them hops back
onto the memory writer through ``trio.from_thread``. A dream that waits a
minute for an LLM therefore holds neither the event loop nor the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import trio

from node.config import NodeConfig
from node.crystals.model import AccessScope, SemanticType
from node.memory.working.backend import MemoryBackend, NoteKind
from node.memory.working.build import working_memory_for
from node.memory.working.inputs import NicheData
from node.memory.working.working import DEFAULT_NAMESPACE, WorkingMemory, check_namespace

log = logging.getLogger(__name__)


class WorkingMemoryServiceMixin:
    config: NodeConfig
    memory: Any  # AsyncMemory: ``await memory.run(function)`` on the database writer
    niche_source: Callable[[], NicheData | None] | None = None

    def working_memory(self, namespace: str = DEFAULT_NAMESPACE) -> WorkingMemory:
        cache: dict[str, WorkingMemory] = self.__dict__.setdefault("_working_memories", {})
        namespace = check_namespace(namespace)
        if namespace not in cache:
            backend = MemoryBackend(self._plain_memory(), run=self._on_memory_writer)
            cache[namespace] = working_memory_for(self.config, self._plain_memory(), namespace,
                                                  self.niche_source, backend)
        return cache[namespace]

    def _plain_memory(self) -> Any:
        memory = self.memory
        return getattr(memory, "memory", None) or getattr(memory, "_memory", None) or memory

    def _on_memory_writer(self, function: Callable[[], Any]) -> Any:
        """Called from a working-memory worker thread: run ``function`` on the memory writer."""
        return trio.from_thread.run(self.memory.run, function)

    async def memory_note(self, text: str, importance: float, namespace: str = DEFAULT_NAMESPACE,
                          semantic_type: str | None = None, scope: str | None = None) -> dict[str, Any]:
        working = self.working_memory(namespace)
        kind = NoteKind(SemanticType(semantic_type or SemanticType.GENERAL),
                        AccessScope(scope) if scope else None)
        result = await trio.to_thread.run_sync(working.note, text, importance, kind)
        return result.to_dict() | {"namespace": working.namespace}

    async def memory_dream(self, namespace: str = DEFAULT_NAMESPACE, force: bool = True) -> dict[str, Any]:
        working = self.working_memory(namespace)
        result = await trio.to_thread.run_sync(partial(working.dream, force=force))
        return result.to_dict() | {"namespace": working.namespace}

    async def memory_context(self, window_tokens: int, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        working = self.working_memory(namespace)
        text = await trio.to_thread.run_sync(working.context, window_tokens)
        return {"namespace": working.namespace, "window": window_tokens, "context": text}

    async def crystallize_skill(self, crystal_id: str, text: str | None, category: str | None,
                                tags: Sequence[str]) -> dict[str, Any]:
        backend = self.working_memory().backend
        crystal = await trio.to_thread.run_sync(partial(backend.crystallize, crystal_id, text, category,
                                                        tuple(tags)))
        return crystal.to_dict()

    async def auto_scratch(self) -> list[dict[str, Any]]:
        """After a consolidation cycle: an ``[AUTO]`` note per hormone above 0.7 (default namespace)."""
        notes = await trio.to_thread.run_sync(self.working_memory().auto_scratch)
        return [note.to_dict() for note in notes]

    async def dream_periodically(self, interval_s: float) -> None:
        """Every ``interval_s``: a dream in each active namespace that has enough new material."""
        while True:
            await trio.sleep(interval_s)
            for namespace in self._dream_namespaces():
                try:
                    result = await self.memory_dream(namespace, force=False)
                    log.info("scheduled dream in %s: %s %s", namespace, result["status"],
                             result.get("reason") or "")
                except Exception:
                    log.exception("scheduled dream in %s failed", namespace)

    def _dream_namespaces(self) -> list[str]:
        root = self.config.data_dir / "memory"
        names = {DEFAULT_NAMESPACE}
        if root.is_dir():
            for entry in root.iterdir():
                try:
                    if entry.is_dir() and not entry.is_symlink():
                        names.add(check_namespace(entry.name))
                except ValueError:
                    continue
        return sorted(names)
