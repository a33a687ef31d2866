"""The node's async face of working memory (seed 001): what the API routes and the schedule call.

``node.service`` builds one over the node's ``config``, ``memory`` (its
``AsyncMemory``, whose ``run`` is the database's single writer) and the market's
economics for The Niche; the API's working-memory routes call it
(``node.api.interface.WorkingApi``).

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
from node.memory.async_memory import AsyncMemory
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend, note_kind
from node.memory.working.build import working_memory_for
from node.memory.working.dream import NicheData
from node.memory.working.resource_versions import SKILL_INDEX_LIMIT, working_versions
from node.memory.working.working import DEFAULT_NAMESPACE, WorkingMemory, check_namespace

log = logging.getLogger(__name__)


class WorkingMemoryService:
    def __init__(self, config: NodeConfig, memory: AsyncMemory, source: Memory,
                 niche: Callable[[], NicheData | None] | None = None) -> None:
        """``source``: the node's open ``Memory``; ``niche`` reads the market's economics."""
        self.config = config
        self.memory = memory
        self._working_source = source
        self._working_niche = niche
        self._working_memories: dict[str, WorkingMemory] = {}

    def working_memory(self, namespace: str = DEFAULT_NAMESPACE) -> WorkingMemory:
        namespace = check_namespace(namespace)
        if namespace not in self._working_memories:
            backend = MemoryBackend(self._working_source, run=self._on_memory_writer, namespace=namespace)
            self._working_memories[namespace] = working_memory_for(
                self.config, self._working_source, namespace, self._working_niche, backend)
        return self._working_memories[namespace]

    def _on_memory_writer(self, function: Callable[[], Any]) -> Any:
        """Called from a working-memory worker thread: run ``function`` on the memory writer."""
        return trio.from_thread.run(self.memory.run, function)

    async def note(self, text: str, importance: float, namespace: str = DEFAULT_NAMESPACE,
                   semantic_type: str | None = None, scope: str | None = None,
                   lifespan: str | None = None) -> dict[str, Any]:
        working = self.working_memory(namespace)
        kind = note_kind(semantic_type, scope, lifespan)
        result = await trio.to_thread.run_sync(working.note, text, importance, kind)
        return result.to_dict() | {"namespace": working.namespace}

    async def dream(self, namespace: str = DEFAULT_NAMESPACE, force: bool = True) -> dict[str, Any]:
        working = self.working_memory(namespace)
        result = await trio.to_thread.run_sync(partial(working.dream, force=force))
        return result.to_dict() | {"namespace": working.namespace}

    async def context(self, window_tokens: int, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        working = self.working_memory(namespace)
        text = await trio.to_thread.run_sync(working.context, window_tokens)
        return {"namespace": working.namespace, "window": window_tokens, "context": text}

    async def state(self, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        """MEMORY.md as written and the notes not yet folded into it (what MCP serves as resources)."""
        working = self.working_memory(namespace)

        def read() -> tuple[str, list[Any]]:
            working.activate()
            return working.read_state(), working.pending_notes()

        memory_md, notes = await trio.to_thread.run_sync(read)
        return {"namespace": working.namespace, "memory_md": memory_md,
                "notes": [note.to_dict() for note in notes]}

    async def proposals(self, namespace: str = DEFAULT_NAMESPACE,
                        status: str | None = "pending") -> dict[str, Any]:
        """Directives a dream proposed (docs/memory.md): the user confirms or dismisses each."""
        working = self.working_memory(namespace)
        found = await trio.to_thread.run_sync(working.proposals, status)
        return {"namespace": working.namespace, "proposals": found}

    async def decide_proposal(self, proposal_id: str, adopt: bool,
                              namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        working = self.working_memory(namespace)
        return await trio.to_thread.run_sync(working.decide_proposal, proposal_id, adopt)

    async def versions(self, namespaces: Sequence[str], skills: bool = False) -> dict[str, Any]:
        """Versions of MEMORY.md and the notes of each namespace (and of the skill index), for a
        subscriber that polls for changes (``node.memory.working.resource_versions``)."""
        workings = [self.working_memory(namespace) for namespace in dict.fromkeys(namespaces)]
        files = await trio.to_thread.run_sync(
            lambda: {working.namespace: working_versions(working) for working in workings})
        result: dict[str, Any] = {"namespaces": files}
        if skills:
            result["skills"] = await self.memory.list_version(DEFAULT_NAMESPACE, ("skill",), SKILL_INDEX_LIMIT)
        return result

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

    async def auto_scratch_logged(self) -> None:
        """Auto-scratch that never fails its caller (a consolidation cycle)."""
        try:
            notes = await self.auto_scratch()
        except Exception:
            log.exception("auto-scratch failed")
            return
        if notes:
            log.info("auto-scratch: %d hormonal spike note(s)", len(notes))

    async def consolidate_periodically(self, interval_s: float) -> None:
        """Seed 000's consolidation cycle, then seed 001's auto-scratch, every ``interval_s``."""
        while True:
            await trio.sleep(interval_s)
            try:
                await self.memory.consolidate()
            except Exception:
                log.exception("consolidation failed")
            await self.auto_scratch_logged()

    async def dream_periodically(self, interval_s: float) -> None:
        """Every ``interval_s``: a dream in each active namespace that has enough new material."""
        while True:
            await trio.sleep(interval_s)
            for namespace in self._dream_namespaces():
                try:
                    result = await self.dream(namespace, force=False)
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
