"""Memory as a portable JSONL file: every current memory with its versions, out and back in.

``crystalmesh memory export --format jsonl FILE`` / ``memory import FILE``
(docs/memory.md, "Export and import"). The file is one JSON object per line:

* a header: ``{"format": "crystalmesh-memory", "version": 1, "embedder", "dim",
  "second_opinion", "exported_at", "counts", "hormones", "left_out"}``;
* one line per crystal, oldest row first: ``{"crystal": Crystal.to_dict(), "vector": base64
  float32 | null, "windows", "second", "turn", "knowledge", "energy", "fact", "chunk", "insight",
  "insight_sources", "dream_mark"}``, all but the first two only where the store has them (a
  long text's window vectors, the second encoder's vector, the conversation or transcript turn
  it was, its confidence row, its energy tier, the fact it is evidence for, an indexed file's
  chunk and file rows, a dream's insight and its sources, its dream marks), so origins,
  confidence, tiers, file re-syncs and insights survive the trip.

What goes out: every memory with a current version (not deleted, superseded, expired or
archived), with all of its versions (superseded ones keep ``validTo`` / ``supersededBy``).
Left out, and said so in the header: deleted memories (tombstones), memories whose every
version expired or was archived (merged away), and rows stored damaged. Private and
confidential memories are included: the file is the node's own user's, written 0600.

What comes in (:func:`import_jsonl`), all or nothing: the whole file is judged first, every
line as hostile input (at most ``MAX_LINE_BYTES``, nesting checked with
``protocol.codec.json_too_deep`` before ``json.loads``, valid UTF-8 without lone
surrogates, the crystal through ``Crystal.from_dict`` and a check of every column it would
write, the hash recomputed, vectors of the right size, finite and unit length, ids unique,
the count the header announced). One bad line refuses the file with a count of the errors
by kind, and nothing is written. A sound file is then written in one transaction (same ids,
versions, validity, namespaces, provenance, governance, skill fields, counts) and indexed
after the commit. Vectors are the file's when its embedder (name and dimension) is the
node's, else every text is embedded again. A memory already in the node (any version's id)
is left as it is: importing a file twice adds nothing; a memory only partly there, or
whose current text the namespace already holds under another id, is skipped and counted
(``conflicts``), never merged.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``). ``lines`` says what a line of the file is
and judges one; ``export`` writes the file; ``restore`` judges a whole file and
restores it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.portable.export import export_jsonl as export_jsonl
    from node.memory.portable.export import export_lines as export_lines
    from node.memory.portable.export import export_to_path as export_to_path
    from node.memory.portable.export import finish_private as finish_private
    from node.memory.portable.export import open_private as open_private
    from node.memory.portable.lines import FORMAT as FORMAT
    from node.memory.portable.lines import VERSION as VERSION
    from node.memory.portable.lines import ImportRefused as ImportRefused
    from node.memory.portable.lines import is_export as is_export
    from node.memory.portable.lines import is_export_file as is_export_file
    from node.memory.portable.restore import import_jsonl as import_jsonl
    from node.memory.portable.restore import import_path as import_path

__getattr__ = face(__name__)
