"""The dream journal: a dream's result sealed with its checksum before it is applied (seed 001's commit point).

A dream writes ``dream.journal`` (MEMORY.md's new text, the scratch notes it consumed,
its time) atomically, then applies it; a crash between the two is finished on the next
start (``WorkingMemory``) and shown as already applied by the session-start read
(``node.memory.working.bootstrap``). Both read the file through :func:`read_journal`, so
what counts as a sound journal is decided once. ``hashlib`` is imported on use: the
session-start hook pays for it only when a journal is pending.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from node.memory.working.durable import read_bytes

MAX_DEPTH = 8  # a journal nests two levels; a deeper file is crafted


def seal_journal(journal: dict[str, Any]) -> bytes:
    """``journal`` as the file holds it: its canonical JSON and that text's SHA-256."""
    import hashlib

    body = json.dumps(journal, sort_keys=True, ensure_ascii=False)
    return json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "journal": body}).encode()


def read_journal(path: Path, max_bytes: int) -> dict[str, Any] | None:
    """The sealed journal at ``path``, or None when there is none.

    Raises ``ValueError`` (also ``KeyError``, ``TypeError``, ``AttributeError``,
    ``UnsafeFile``) for a file that is not a sound journal: a torn or edited seal, or
    fields of the wrong kind, a nesting deeper than ``MAX_DEPTH``.
    """
    data = read_bytes(path, max_bytes)
    if data is None:
        return None
    import hashlib

    from protocol.codec import json_too_deep

    if json_too_deep(data, MAX_DEPTH):  # before json.loads recurses (py_ecc raises the recursion limit)
        raise ValueError("nests too deep")
    sealed = json.loads(data)
    body = sealed["journal"]
    if hashlib.sha256(body.encode()).hexdigest() != sealed["sha256"]:
        raise ValueError("checksum mismatch")
    if json_too_deep(body.encode(), MAX_DEPTH):
        raise ValueError("nests too deep")
    journal = json.loads(body)
    if not (isinstance(journal.get("state"), str) and isinstance(journal.get("consumed"), list)
            and all(isinstance(item, str) for item in journal["consumed"])
            and isinstance(journal.get("dream_ms"), int)):
        raise ValueError("malformed journal")
    return journal  # type: ignore[no-any-return]
