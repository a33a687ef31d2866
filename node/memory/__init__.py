"""A node's memory: knowledge crystals stored, searched, consolidated, learning and dreaming.

The face is ``Memory`` (sync) and ``AsyncMemory`` (trio) over wings by concept:
``embedding`` (every encoder and its weights), ``search`` (everything a query passes
through), ``learning`` (facts, confidence, tiers, testaments), ``dynamics`` (importance,
consolidation, hormones), ``working`` (MEMORY.md, scratch WAL, dream) and ``files`` (files and
folders indexed by structure and kept in step).

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory import learning_service as learning_service
    from node.memory import versions as versions
    from node.memory.async_memory import AsyncMemory as AsyncMemory
    from node.memory.chat import LlmError as LlmError
    from node.memory.chat import chat_completion as chat_completion
    from node.memory.conversations import MAX_CONVERSATION_BYTES as MAX_CONVERSATION_BYTES
    from node.memory.conversations import ConversationRefused as ConversationRefused
    from node.memory.conversations import ingest_conversation as ingest_conversation
    from node.memory.conversations import neighbours as neighbours
    from node.memory.embedding.embedder import EMBEDDER_NAMES as EMBEDDER_NAMES
    from node.memory.embedding.embedder import build_default_model as build_default_model
    from node.memory.facade import ConsolidationReport as ConsolidationReport
    from node.memory.facade import ExecutionOutcome as ExecutionOutcome
    from node.memory.facade import Memory as Memory
    from node.memory.facade import MemoryInputError as MemoryInputError
    from node.memory.facade import SearchHit as SearchHit
    from node.memory.facade import SearchRequest as SearchRequest
    from node.memory.files import MAX_PATH_CHARS as MAX_PATH_CHARS
    from node.memory.files import Document as Document
    from node.memory.files import FileState as FileState
    from node.memory.files import IndexOptions as IndexOptions
    from node.memory.files import data_dir_exclusions as data_dir_exclusions
    from node.memory.files import index_paths as index_paths
    from node.memory.files import known_files as known_files
    from node.memory.files import sync_documents as sync_documents
    from node.memory.learning.budget_context import budget_context as budget_context
    from node.memory.learning.testament_io import TestamentRefused as TestamentRefused
    from node.memory.learning.testament_io import export_testament as export_testament
    from node.memory.learning.testament_io import import_testament as import_testament
    from node.memory.learning.testament_io import read_testament_file as read_testament_file
    from node.memory.learning.testament_io import write_private as write_private
    from node.memory.learning.tiers import end_session as end_session
    from node.memory.learning_service import LearningService as LearningService
    from node.memory.namespaces import validate_namespace as validate_namespace
    from node.memory.portable import ImportRefused as ImportRefused
    from node.memory.portable import export_jsonl as export_jsonl
    from node.memory.portable import export_to_path as export_to_path
    from node.memory.portable import finish_private as finish_private
    from node.memory.portable import import_jsonl as import_jsonl
    from node.memory.portable import import_path as import_path
    from node.memory.portable import is_export_file as is_export_file
    from node.memory.portable import open_private as open_private
    from node.memory.reembedding import reembed as reembed
    from node.memory.requests import MAX_TAGS as MAX_TAGS
    from node.memory.requests import MAX_TTL_MS as MAX_TTL_MS
    from node.memory.requests import add_from_request as add_from_request
    from node.memory.requests import consolidate_at as consolidate_at
    from node.memory.search import SOURCES as SOURCES
    from node.memory.search import origin_label as origin_label
    from node.memory.search import search_request as search_request
    from node.memory.text_limits import MAX_SKILL_TEXT_BYTES as MAX_SKILL_TEXT_BYTES
    from node.memory.text_limits import MAX_TEXT_CHARS as MAX_TEXT_CHARS
    from node.memory.text_limits import check_text_size as check_text_size
    from node.memory.transcripts import TranscriptChunk as TranscriptChunk
    from node.memory.transcripts import TranscriptConflict as TranscriptConflict
    from node.memory.transcripts import TranscriptRefused as TranscriptRefused
    from node.memory.transcripts import feed_transcript as feed_transcript
    from node.memory.transcripts import ingest_transcript_chunk as ingest_transcript_chunk
    from node.memory.transcripts import transcript_cursor as transcript_cursor
    from node.memory.versions import add_with_outcome as add_with_outcome
    from node.memory.versions import delete as delete
    from node.memory.versions import history as history
    from node.memory.versions import list_memories as list_memories
    from node.memory.versions import set_lifespan as set_lifespan
    from node.memory.versions import update_from_request as update_from_request
    from node.memory.working.backend import MemoryBackend as MemoryBackend
    from node.memory.working.backend import NoteKind as NoteKind
    from node.memory.working.backend import note_kind as note_kind
    from node.memory.working.bootstrap import bootstrap_context as bootstrap_context
    from node.memory.working.build import working_memory_for as working_memory_for
    from node.memory.working.dream.inputs import NicheData as NicheData
    from node.memory.working.durable import UnsafeFile as UnsafeFile
    from node.memory.working.durable import atomic_write as atomic_write
    from node.memory.working.durable import ensure_dir as ensure_dir
    from node.memory.working.durable import file_lock as file_lock
    from node.memory.working.durable import fsync_dir as fsync_dir
    from node.memory.working.durable import open_nofollow as open_nofollow
    from node.memory.working.durable import read_bytes as read_bytes
    from node.memory.working.durable import write_all as write_all
    from node.memory.working.requests import crystallize_skill as crystallize_skill
    from node.memory.working.requests import decide_directive as decide_directive
    from node.memory.working.requests import directive_proposals as directive_proposals
    from node.memory.working.requests import memory_consolidate as memory_consolidate
    from node.memory.working.requests import memory_context as memory_context
    from node.memory.working.requests import memory_dream as memory_dream
    from node.memory.working.requests import memory_note as memory_note
    from node.memory.working.requests import working_state as working_state
    from node.memory.working.scratch import DEFAULT_IMPORTANCE as DEFAULT_IMPORTANCE
    from node.memory.working.scratch import parse_scratch as parse_scratch
    from node.memory.working.service import WorkingMemoryService as WorkingMemoryService
    from node.memory.working.state import DEFAULT_WINDOW_TOKENS as DEFAULT_WINDOW_TOKENS
    from node.memory.working.working import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE
    from node.memory.working.working import WorkingMemory as WorkingMemory

__getattr__ = face(__name__)
