"""Routes of the node's memory: store, read, search, status and consolidate crystals; CRUD with
history and namespaces (issue 14); conversations, transcripts, indexed files and export.

``POST /v1/crystals`` stores a memory, ``GET /v1/crystals/{id}`` reads one with its
audit trail, ``POST /v1/crystals/search`` searches (``node.memory.SearchRequest``),
``GET /v1/memory/status`` and ``POST /v1/memory/consolidate`` run the memory's upkeep.
``GET /v1/crystals`` lists a namespace's current memories, ``PATCH
/v1/crystals/{id}`` writes a new version, ``DELETE /v1/crystals/{id}`` tombstones
the memory, ``POST /v1/crystals/{id}/lifespan`` pins or unpins it, ``GET
/v1/crystals/{id}/history`` returns every version and
transition, ``GET /v1/namespaces`` the namespaces in use. Like every ``/v1``
route they need the bearer token; bodies and queries are pydantic models.

Conversations (docs/memory.md): ``POST /v1/memory/conversations`` ingests a
conversation file sent base64 in the body (the node never opens a path a
request names; the body limit bounds the file to about 750 KiB, larger ones go
through ``memory ingest`` with the node stopped), ``GET
/v1/crystals/{id}/neighbours?window=N`` returns the turns around a turn's hit.

Export (docs/memory.md, "Export and import"): ``GET /v1/memory/export`` answers the
portable JSONL (``application/x-ndjson``), written in one call on the database's
thread into an unnamed temporary file (0600, gone when closed) and streamed from
there, so the file is one state of memory and the event loop never holds it all.
There is no import route: a restore writes many thousand rows with their ids and
would hold the node's single writer for minutes, and the file can exceed any body
limit; ``memory import FILE`` restores with the node stopped.

Session transcripts (docs/memory.md, "Sessions"): ``POST /v1/memory/transcripts`` takes
one chunk of a transcript's complete lines (base64, with the byte offset it starts at,
the file's fingerprint and where it ends) and answers what was stored and the node's
new ``offset``; ``GET /v1/memory/transcripts/cursor?transcript=...`` says where the node
stopped. The client reads the file itself (``ApiClient.memory_ingest_transcript``); a
chunk that does not continue where the node stopped is a 409 with nothing stored.
Indexed files (docs/memory.md, "Files"): ``crystalmesh memory index`` beside a
running node reads the files in its own process; ``GET /v1/memory/files?root=``
says what the index holds under a folder (size, mtime, all chunks current) and
``POST /v1/memory/files/sync`` takes a batch of files' bytes (base64) and the
paths that left; a path is only a label here, never opened.
"""

from __future__ import annotations

import base64
import binascii
import json
import tempfile
from collections.abc import AsyncIterator
from typing import IO, Annotated, Any, Literal

import trio
from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from node.api import shapes
from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import NAMESPACE_PATTERN, Body, ConsolidateIn, CrystalIn, SearchIn
from node.crystals import AccessScope, SemanticType
from node.memory import (
    MAX_PATH_CHARS,
    MAX_SKILL_TEXT_BYTES,
    ConversationRefused,
    Document,
    MemoryInputError,
    TranscriptChunk,
    TranscriptRefused,
)

Json = dict[str, Any]
Namespace = Annotated[str, Field(min_length=1, max_length=100, pattern=NAMESPACE_PATTERN)]


class UpdateIn(Body):
    """``PATCH /v1/crystals/{crystal_id}``: the new text and/or scope (a new version)."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_SKILL_TEXT_BYTES)] | None = None
    scope: AccessScope | None = None


class LifespanIn(Body):
    """``POST /v1/crystals/{crystal_id}/lifespan``: ``permanent`` pins the memory (it never
    expires by decay), ``decay`` unpins it."""

    lifespan: Literal["decay", "permanent"]


class MemoryListQuery(BaseModel):
    """``GET /v1/crystals`` query."""

    namespace: Namespace = "default"
    type: list[SemanticType] = []
    limit: Annotated[int, Field(ge=1, le=1000)] = 50


class ConversationIn(Body):
    """``POST /v1/memory/conversations``: a conversation file (JSON, JSONL or LoCoMo's shape), base64."""

    content_b64: Annotated[str, Field(min_length=1, max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]+$")]
    namespace: Namespace | None = None
    type: SemanticType = SemanticType.GENERAL


Transcript = Annotated[str, Field(min_length=1, max_length=4096)]
TranscriptFormat = Literal["claude-code", "codex", "messages"]


class TranscriptChunkIn(Body):
    """``POST /v1/memory/transcripts``: complete lines of a transcript from byte ``offset`` (base64)."""

    transcript: Transcript  # the file's absolute path on the client: a key, never opened here
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    offset: Annotated[int, Field(ge=0)]
    end_offset: Annotated[int, Field(ge=0)]
    data_b64: Annotated[str, Field(max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]*$")]
    format: TranscriptFormat | None = None
    namespace: Namespace | None = None


class TranscriptCursorQuery(BaseModel):
    """``GET /v1/memory/transcripts/cursor`` query."""

    transcript: Transcript
    namespace: Namespace | None = None
FilePath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS, pattern=r"^/[^\x00-\x1f\x7f]*$")]


class FilesQuery(BaseModel):
    """``GET /v1/memory/files`` query: what the index holds under a folder (or of one file)."""

    root: FilePath
    namespace: Namespace | None = None


class DocumentIn(Body):
    """One file read by the caller (the node never opens it): its path is a label."""

    path: FilePath
    size: Annotated[int, Field(ge=0, le=2**53)]
    mtime_ns: Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
    content_b64: Annotated[str, Field(max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]*$")]


class FilesSyncIn(Body):
    """``POST /v1/memory/files/sync``: files read by the caller, and the paths that left (with why)."""

    namespace: Namespace | None = None
    documents: Annotated[list[DocumentIn], Field(default_factory=list, max_length=1000)]
    removed: Annotated[dict[FilePath, Annotated[str, Field(max_length=32)]],
                       Field(default_factory=dict, max_length=20_000)]


class NeighboursQuery(BaseModel):
    """``GET /v1/crystals/{crystal_id}/neighbours`` query: turns either side of the hit."""

    window: Annotated[int, Field(ge=0, le=20)] = 2


def memory_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)], tags=["memory"])

    @router.post("/crystals", response_model=shapes.StoredCrystal)
    async def add_crystal(body: CrystalIn) -> Json:
        return await node.memory.add_with_outcome(body.model_dump(mode="json", exclude_none=True))

    @router.get("/crystals/{crystal_id}", response_model=shapes.CrystalDetail)
    async def get_crystal(crystal_id: str) -> Json:
        return await node.memory.detail(crystal_id)

    @router.post("/crystals/search", response_model=shapes.Hits)
    async def search(body: SearchIn) -> Json:
        hits = await node.memory.search(body.to_request())
        return {"hits": [hit.to_dict() for hit in hits]}

    @router.get("/memory/status")
    async def memory_status() -> Json:
        return await node.memory.status()

    @router.post("/memory/consolidate")
    async def consolidate(body: ConsolidateIn | None = None) -> Json:
        request = body or ConsolidateIn()
        return await node.working.consolidate(request.purge, request.at, request.dry_run)

    @router.get("/crystals", response_model=shapes.Crystals)
    async def list_memories(query: Annotated[MemoryListQuery, Query()]) -> Json:
        return {"crystals": await node.memory.list_memories(
            query.namespace, tuple(t.value for t in query.type), query.limit)}

    @router.patch("/crystals/{crystal_id}", response_model=shapes.UpdatedCrystal)
    async def update_memory(crystal_id: str, body: UpdateIn) -> Json:
        return await node.memory.update(crystal_id, body.model_dump(mode="json", exclude_none=True))

    @router.delete("/crystals/{crystal_id}")
    async def delete_memory(crystal_id: str) -> Json:
        return await node.memory.delete(crystal_id)

    @router.post("/crystals/{crystal_id}/lifespan", response_model=shapes.PinnedCrystal)
    async def set_lifespan(crystal_id: str, body: LifespanIn) -> Json:
        return await node.memory.set_lifespan(crystal_id, body.lifespan)

    @router.get("/crystals/{crystal_id}/history", response_model=shapes.History)
    async def memory_history(crystal_id: str) -> Json:
        return await node.memory.history(crystal_id)

    @router.post("/memory/conversations")
    async def ingest_conversation(body: ConversationIn) -> Json:
        try:
            data = base64.b64decode(body.content_b64, validate=True)
        except binascii.Error as error:
            raise ConversationRefused(f"content_b64 is not base64: {error}") from error
        return await node.memory.ingest_conversation(data, body.namespace, body.type.value)

    @router.post("/memory/transcripts")
    async def ingest_transcript_chunk(body: TranscriptChunkIn) -> Json:
        try:
            data = base64.b64decode(body.data_b64, validate=True)
        except binascii.Error as error:
            raise TranscriptRefused(f"data_b64 is not base64: {error}") from error
        return await node.memory.ingest_transcript_chunk(TranscriptChunk(
            body.transcript, body.fingerprint, body.offset, data, body.end_offset, body.format, body.namespace))

    @router.get("/memory/transcripts/cursor")
    async def transcript_cursor(query: Annotated[TranscriptCursorQuery, Query()]) -> Json:
        return await node.memory.transcript_cursor(query.transcript, query.namespace)
    @router.get("/memory/files")
    async def indexed_files(query: Annotated[FilesQuery, Query()]) -> Json:
        known = await node.memory.known_files(query.namespace, query.root)
        return {"files": [[path, state.size, state.mtime_ns, state.fresh] for path, state in sorted(known.items())]}

    @router.post("/memory/files/sync")
    async def sync_files(body: FilesSyncIn) -> Json:
        documents = []
        for document in body.documents:
            try:
                content = base64.b64decode(document.content_b64, validate=True)
            except binascii.Error as error:
                raise MemoryInputError(f"content_b64 of {document.path} is not base64: {error}") from error
            documents.append(Document(document.path, document.size, document.mtime_ns, content))
        return await node.memory.sync_files(body.namespace, documents, dict(body.removed))

    @router.get("/crystals/{crystal_id}/neighbours")
    async def neighbours(crystal_id: str, query: Annotated[NeighboursQuery, Query()]) -> Json:
        return await node.memory.neighbours(crystal_id, query.window)

    @router.get("/namespaces")
    async def namespaces() -> Json:
        return {"namespaces": await node.memory.namespaces()}

    @router.get("/memory/export", response_class=StreamingResponse)
    async def export_memory() -> StreamingResponse:
        spool = tempfile.TemporaryFile()  # noqa: SIM115 -- closed by the stream below
        try:
            summary = await node.memory.export_jsonl(spool)
            spool.seek(0)
        except BaseException:
            spool.close()
            raise
        headers = {"X-Crystalmesh-Export-Crystals": str(summary["crystals"]),
                   "X-Crystalmesh-Export-Summary": json.dumps(summary, separators=(",", ":")),
                   "Content-Length": str(summary["bytes"])}
        return StreamingResponse(_chunks(spool), media_type="application/x-ndjson", headers=headers)

    return router


async def _chunks(spool: IO[bytes], size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    """The spooled export, a chunk at a time (read off the event loop); the file is closed after."""
    try:
        while chunk := await trio.to_thread.run_sync(spool.read, size):
            yield chunk
    finally:
        spool.close()
