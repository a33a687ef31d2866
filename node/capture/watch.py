"""Follow folders of transcripts for hosts without hooks: ingest every ``*.jsonl`` that grew.

Polling by (size, mtime): a pass lists the folders (``~/.claude/projects``,
``~/.codex/sessions``, …, recursively), and hands each file whose size or mtime
changed since the last pass that stored it to the sink; ingestion is incremental,
so a grown file adds only its new messages. A file whose ingest failed is tried
again on the next pass. Symlinked files and folders are not followed, and the
data dir itself is never read (``checked_transcript``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.capture.drain import TranscriptSink
from node.capture.hook_input import HookInputRefused, checked_transcript

log = logging.getLogger(__name__)

MAX_FILES_PER_PASS = 100_000


@dataclass
class PassReport:
    files: int = 0
    ingested: int = 0
    added: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class TranscriptWatcher:
    def __init__(self, roots: Sequence[Path], data_dir: Path, namespace: str | None = None) -> None:
        self.roots = [Path(root).expanduser() for root in roots]
        self.data_dir = data_dir
        self.namespace = namespace
        self._stored: dict[str, tuple[int, int]] = {}

    def transcripts(self) -> Iterator[tuple[Path, tuple[int, int]]]:
        """Every regular ``*.jsonl`` under the roots, with its (size, mtime_ns); links not followed."""
        count = 0
        for root in self.roots:
            for folder, folders, files in os.walk(root, followlinks=False):
                folders.sort()
                for name in sorted(files):
                    if not name.endswith(".jsonl"):
                        continue
                    path = Path(folder) / name
                    try:
                        info = path.lstat()
                    except OSError:
                        continue
                    if not path.is_symlink() and path.is_file():
                        count += 1
                        if count > MAX_FILES_PER_PASS:
                            return
                        yield path, (info.st_size, info.st_mtime_ns)

    def run_pass(self, sink: TranscriptSink) -> PassReport:
        """Ingest what changed since the last pass."""
        report = PassReport()
        for path, signature in self.transcripts():
            report.files += 1
            if self._stored.get(str(path)) == signature:
                continue
            try:
                checked = checked_transcript(str(path), self.data_dir)
                summary = sink.memory_ingest_transcript(str(checked), namespace=self.namespace)
            except HookInputRefused as refused:
                self._stored[str(path)] = signature  # refused for what it is: not tried again unchanged
                log.info("watch: %s skipped: %s", path, refused)
                continue
            except Exception as error:
                report.failed += 1
                report.errors.append(f"{path}: {type(error).__name__}: {error}"[:300])
                log.error("watch: %s not stored (tried again next pass): %s", path, error)
                continue
            self._stored[str(path)] = signature
            report.ingested += 1
            added = summary.get("added", 0)
            report.added += added if isinstance(added, int) else 0
        return report
