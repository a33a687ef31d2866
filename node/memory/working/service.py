"""The node's async face of working memory (seed 001): what the API routes and the schedule call.

``node.service`` builds one over the node's ``config``, ``memory`` (its
``AsyncMemory``, whose ``run`` is the database's single writer) and the market's
economics for The Niche; the API's working-memory routes call it
(``node.api.interface.WorkingApi``).

Each operation is written once in :mod:`node.memory.working.requests` (a function of one
``WorkingMemory``); this class only chooses where it runs. Working-memory operations block (fsync, file locks, maybe an LLM call), so
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

from node import metrics
from node.config import NodeConfig
from node.memory.async_memory import AsyncMemory
from node.memory.facade import Memory, MemoryInputError
from node.memory.working import requests
from node.memory.working.backend import MemoryBackend
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
        return await trio.to_thread.run_sync(partial(
            requests.memory_note, self.working_memory(namespace), text, importance, semantic_type, scope, lifespan))

    async def dream(self, namespace: str = DEFAULT_NAMESPACE, force: bool = True) -> dict[str, Any]:
        return await trio.to_thread.run_sync(partial(requests.memory_dream, self.working_memory(namespace), force))

    async def context(self, window_tokens: int, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        return await trio.to_thread.run_sync(requests.memory_context, self.working_memory(namespace), window_tokens)

    async def state(self, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        """MEMORY.md as written and the notes not yet folded into it (what MCP serves as resources)."""
        return await trio.to_thread.run_sync(requests.working_state, self.working_memory(namespace))

    async def proposals(self, namespace: str = DEFAULT_NAMESPACE, status: str = "pending") -> dict[str, Any]:
        """Directives a dream proposed (docs/memory.md): the user confirms or dismisses each."""
        return await trio.to_thread.run_sync(requests.directive_proposals, self.working_memory(namespace), status)

    async def decide_proposal(self, proposal_id: str, adopt: bool,
                              namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        return await trio.to_thread.run_sync(requests.decide_directive, self.working_memory(namespace),
                                             proposal_id, adopt)

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
        return await trio.to_thread.run_sync(partial(requests.crystallize_skill, self.working_memory(), crystal_id,
                                                     text, category, tuple(tags)))

    async def consolidate(self, purge: bool = False, at: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        """One consolidation cycle now, or as of ``at`` (``+90d``, an ISO date), then the
        auto-scratch (:func:`node.memory.working.requests.consolidate`); counted in the metrics."""
        try:
            report = await trio.to_thread.run_sync(partial(requests.memory_consolidate, self.working_memory(), at,
                                                           purge, dry_run))
        except MemoryInputError:
            raise  # a refused request (a bad ``at``) is not a failed run
        except Exception:
            metrics.CONSOLIDATION_RUNS.labels(outcome="failed").inc()
            raise
        if not dry_run:  # a preview is not a run
            metrics.CONSOLIDATION_RUNS.labels(outcome="ok").inc()
        return report

    async def consolidate_periodically(self, interval_s: float) -> None:
        """Seed 000's consolidation cycle, then seed 001's auto-scratch, every ``interval_s``."""
        while True:
            await trio.sleep(interval_s)
            try:
                await self.consolidate()
            except Exception:
                log.exception("consolidation failed")

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
