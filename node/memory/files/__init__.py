"""Files and folders as memories: ``crystalmesh memory index PATH…`` and ``memory.index_paths``.

``walk`` chooses the files (``.gitignore``, hidden, binary, oversize, symlinks,
the data dir) and reads them; ``chunking``, ``code`` and ``documents`` cut a
file's text by its structure (Markdown headings, Python definitions, other
languages' definition lines, paragraphs), each chunk with its lines and a key
that survives edits elsewhere; ``sync`` is the one re-sync operation over
``Memory`` (plan, embed, store: unchanged chunks keep their crystals, changed
ones become versions, removed ones are tombstoned); ``indexer`` drives it for
whichever target holds the memory; ``schema`` is the tables that remember what
each file and chunk became.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.files.chunking import Chunk as Chunk
    from node.memory.files.chunking import chunk_markdown as chunk_markdown
    from node.memory.files.documents import chunk_file as chunk_file
    from node.memory.files.documents import memory_text as memory_text
    from node.memory.files.folders import DEFAULT_MAX_FILE_BYTES as DEFAULT_MAX_FILE_BYTES
    from node.memory.files.folders import walk as walk
    from node.memory.files.indexer import BATCH_BYTES as BATCH_BYTES
    from node.memory.files.indexer import IndexOptions as IndexOptions
    from node.memory.files.indexer import Target as Target
    from node.memory.files.indexer import data_dir_exclusions as data_dir_exclusions
    from node.memory.files.indexer import index_paths as index_paths
    from node.memory.files.schema import CONCEPT as CONCEPT
    from node.memory.files.schema import MIGRATIONS as MIGRATIONS
    from node.memory.files.sync import MAX_DOCUMENT_BYTES as MAX_DOCUMENT_BYTES
    from node.memory.files.sync import MAX_PATH_CHARS as MAX_PATH_CHARS
    from node.memory.files.sync import RETIRE_REASONS as RETIRE_REASONS
    from node.memory.files.sync import Document as Document
    from node.memory.files.sync import FileState as FileState
    from node.memory.files.sync import embed_sync as embed_sync
    from node.memory.files.sync import known_files as known_files
    from node.memory.files.sync import plan_sync as plan_sync
    from node.memory.files.sync import store_sync as store_sync
    from node.memory.files.sync import sync_documents as sync_documents

__getattr__ = face(__name__)
