"""The node's memory with no node running: the typed client's methods, answered from the data dir.

A running node owns its database and index, so the CLI speaks to it through
:class:`node.api.client.ApiClient`. When none runs, the commands that work
offline (memory, working memory, learning, skill records) get a ``LocalNode``
from ``CliContext.client()`` instead: the same method names, arguments and
JSON, answered by opening the data dir's ``Memory`` in this process (once, on
the first call; the CLI closes it when the command ends) and calling the same
operation function the node's face runs for that route: the executor differs,
the operation does not (tests/integration/cli/test_cli_contract.py compares the
answers). Every other method is missing on purpose: those commands need the node
(``CliContext.api()``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from node.api import SearchIn, shapes
    from node.memory import Document, FileState, Memory, NicheData, WorkingMemory

Json = dict[str, Any]


def add_lines(memory: Memory, lines: Sequence[str], semantic_type: str,
              progress: Callable[[int, int], None] | None = None, batch: int = 256) -> int:
    """``memory import FILE``: each line a crystal, ``batch`` at a time; how many were new."""
    from node.crystals import SemanticType

    created = 0
    for start in range(0, len(lines), batch):
        crystals = [memory.prepare(text, semantic_type=SemanticType(semantic_type))
                    for text in lines[start : start + batch]]
        created += sum(1 for result in memory.add_crystals(crystals) if result.created)
        if progress is not None:
            progress(min(start + batch, len(lines)), len(lines))
    return created


class LocalNode:
    """``ApiClient``'s memory methods over the data dir (see the module docstring).

    ``open_memory`` opens the data dir's memory (``CliContext.memory``), called when a
    method first needs it. Each method only passes its arguments to the operation the node
    runs for the same route (``node.memory``'s operation functions; README, "Adding an
    operation"): no operation is written here. What differs is the
    executor: the node runs them on its database's single writer, this runs them in the
    CLI's own thread.
    """

    def __init__(self, open_memory: Callable[[], Memory]) -> None:
        self._open_memory = open_memory
        self._opened: Memory | None = None
        self._workings: dict[str, WorkingMemory] = {}

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None
            self._workings.clear()

    def _memory(self) -> Memory:
        if self._opened is None:
            self._opened = self._open_memory()
        return self._opened

    def _working(self, namespace: str = "default") -> WorkingMemory:
        """The namespace's working memory, built as the node builds it (one per namespace)."""
        from node.memory import validate_namespace, working_memory_for

        namespace = validate_namespace(namespace)
        if namespace not in self._workings:
            memory = self._memory()
            self._workings[namespace] = working_memory_for(memory.config, memory, namespace,
                                                           _niche(memory))
        return self._workings[namespace]

    # --- memory -------------------------------------------------------------------------------
    def memory_add(self, text: str, *, semantic_type: str | None = None, scope: str | None = None,
                   path: str | None = None, ttl_ms: int | None = None, category: str | None = None,
                   tags: Sequence[str] | None = None, namespace: str | None = None,
                   importance: float | None = None, lifespan: str | None = None) -> shapes.StoredCrystal:
        from node.api import add_body
        from node.memory import versions

        return cast("shapes.StoredCrystal", versions.add_memory(self._memory(), add_body(
            text, semantic_type=semantic_type, scope=scope, path=path, ttl_ms=ttl_ms, category=category,
            tags=tags, namespace=namespace, importance=importance, lifespan=lifespan)))

    def memory_set_lifespan(self, crystal_id: str, lifespan: str) -> shapes.PinnedCrystal:
        from node.memory import set_lifespan

        return cast("shapes.PinnedCrystal", set_lifespan(self._memory(), crystal_id, lifespan))

    def memory_get(self, crystal_id: str) -> shapes.CrystalDetail:
        from node.memory import versions

        return cast("shapes.CrystalDetail", versions.detail(self._memory(), crystal_id))

    def memory_search(self, query: str | SearchIn, k: int = 10, **filters: Any) -> list[shapes.Hit]:
        from node.api import SearchIn

        request = SearchIn.coerce(query, k, **filters)
        return [cast("shapes.Hit", hit.to_dict()) for hit in self._memory().search(request.to_request())]

    def memory_list(self, namespace: str | None = None, types: Sequence[str] = (),
                    limit: int = 50) -> list[shapes.Crystal]:
        from node.memory import list_memories

        return [cast("shapes.Crystal", crystal.to_dict()) for crystal in list_memories(self._memory(), namespace, tuple(types), limit)]

    def memory_update(self, crystal_id: str, text: str | None = None,
                      scope: str | None = None) -> shapes.UpdatedCrystal:
        from node.api import update_body
        from node.memory import update_from_request

        return cast("shapes.UpdatedCrystal", update_from_request(self._memory(), crystal_id,
                                                                 update_body(text, scope)))

    def memory_delete(self, crystal_id: str) -> Json:
        from node.memory import delete

        return delete(self._memory(), crystal_id)

    def memory_history(self, crystal_id: str) -> shapes.History:
        from node.memory import history

        return cast("shapes.History", history(self._memory(), crystal_id))

    def memory_status(self) -> Json:
        return self._memory().status()

    def memory_consolidate(self, purge: bool = False, at: str | None = None, dry_run: bool = False) -> Json:
        from node.memory import memory_consolidate

        return memory_consolidate(self._working(), at, purge, dry_run)

    def memory_ingest_conversation(self, content_b64: str, *, namespace: str | None = None,
                                   semantic_type: str | None = None,
                                   progress: Callable[[int, int], None] | None = None) -> Json:
        from node.memory import ingest_conversation

        return ingest_conversation(self._memory(), base64.b64decode(content_b64, validate=True), namespace,
                                   semantic_type or "general", progress)

    def memory_export(self, path: str, progress: Callable[[int, int], None] | None = None) -> Json:
        from node.memory import export_to_path

        return export_to_path(self._memory(), path, progress)

    def memory_ingest_transcript(self, path: str, *, format: str | None = None, namespace: str | None = None,
                                 progress: Callable[[int, int], None] | None = None) -> Json:
        from node.memory import feed_transcript, ingest_transcript_chunk, transcript_cursor

        memory = self._memory()
        return feed_transcript(path, lambda transcript, space: transcript_cursor(memory, transcript, space),
                               lambda chunk: ingest_transcript_chunk(memory, chunk),
                               format=format, namespace=namespace, progress=progress)

    def memory_transcript_cursor(self, transcript: str, namespace: str | None = None) -> Json:
        from node.memory import transcript_cursor

        return transcript_cursor(self._memory(), transcript, namespace)
    # --- indexed files (docs/memory.md, "Files") -----------------------------------------------
    max_document_bytes = 8 * 1024 * 1024  # no request in between: the walk's own cap decides

    def known_files(self, namespace: str | None, root: str) -> dict[str, FileState]:
        from node.memory import known_files

        return known_files(self._memory(), namespace, root)

    def sync_files(self, namespace: str | None, documents: Sequence[Document],
                   removed: dict[str, str]) -> Json:
        from node.memory import sync_documents

        return sync_documents(self._memory(), namespace, documents, removed)

    def memory_index(self, paths: Sequence[str], *, namespace: str | None = None,
                     max_file_bytes: int | None = None, exclude: Sequence[str] = (),
                     progress: Callable[[str], None] | None = None) -> Json:
        """Index files and folders (``memory index``): read here, synced into the data dir."""
        from node.memory import IndexOptions, data_dir_exclusions, index_paths

        config = self._memory().config
        options = IndexOptions(namespace, max_file_bytes or config.memory.index_max_file_bytes,
                               (*exclude, *data_dir_exclusions(config.data_dir)))
        return index_paths(self, paths, options, progress)

    def memory_neighbours(self, crystal_id: str, window: int = 2) -> Json:
        from node.memory import neighbours

        return neighbours(self._memory(), crystal_id, window)

    # --- working memory (seed 001) ------------------------------------------------------------
    def memory_note(self, text: str, importance: float, namespace: str, semantic_type: str | None = None,
                    scope: str | None = None, lifespan: str | None = None) -> shapes.Note:
        from node.memory import memory_note

        return cast("shapes.Note", memory_note(self._working(namespace), text, importance, semantic_type,
                                               scope, lifespan))

    def memory_dream(self, namespace: str) -> Json:
        from node.memory import memory_dream

        return memory_dream(self._working(namespace))

    def directive_proposals(self, namespace: str = "default", status: str = "pending") -> Json:
        from node.memory import directive_proposals

        return directive_proposals(self._working(namespace), status)

    def decide_directive(self, proposal_id: str, adopt: bool, namespace: str = "default") -> Json:
        from node.memory import decide_directive

        return decide_directive(self._working(namespace), proposal_id, adopt)

    def memory_context(self, window_tokens: int, namespace: str) -> Json:
        from node.memory import memory_context

        return memory_context(self._working(namespace), window_tokens)

    def crystallize_skill(self, crystal_id: str, text: str | None = None, category: str | None = None,
                          tags: Sequence[str] = ()) -> Json:
        from node.memory import crystallize_skill

        return crystallize_skill(self._working(), crystal_id, text, category, tags)

    # --- memory that learns (seed 003/004) ----------------------------------------------------
    def memory_feedback(self, crystal_id: str, verdict: str) -> Json:
        from node.memory import learning_service

        return learning_service.feedback(self._memory(), crystal_id, verdict)

    def session_end(self) -> Json:
        from node.memory import learning_service

        return learning_service.session_end(self._memory())

    def testament_export(self) -> Json:
        from node.keys import load_identity
        from node.memory import learning_service

        memory = self._memory()
        return learning_service.testament_export(memory, load_identity(memory.config))

    def testament_import(self, testament_b64: str) -> Json:
        from node.memory import learning_service

        return learning_service.testament_import(self._memory(), testament_b64)

    def budget_context(self, query: str, budget_tokens: int, working_memory: str | None = None,
                       sources: Sequence[str] = ()) -> Json:
        from node.memory import learning_service

        return learning_service.budget(self._memory(), query, budget_tokens, working_memory, tuple(sources))

    # --- skills -------------------------------------------------------------------------------
    def add_skill(self, text: str, *, scope: str, category: str | None = None, tags: Sequence[str] = (),
                  namespace: str | None = None) -> Json:
        from node.api import skill_body
        from node.memory import versions

        return versions.add_memory(self._memory(), skill_body(text, scope=scope, category=category, tags=tags,
                                                              namespace=namespace))

    def record_execution(self, crystal_id: str, success: bool, reward: float | None = None,
                         note: str | None = None) -> Json:
        from node.market import record_skill_run
        from node.trust import Ledger

        memory = self._memory()
        return record_skill_run(memory, Ledger(memory.db).record, crystal_id, success, reward, note).to_dict()

    def new_skill_version(self, crystal_id: str, text: str) -> Json:
        return self._memory().new_skill_version(crystal_id, text).to_dict()


def _niche(memory: Memory) -> Callable[[], NicheData | None]:
    """The market's economics for The Niche, read from the data dir's ledger as the node reads it."""
    from node.market import niche_source

    return niche_source(memory)
