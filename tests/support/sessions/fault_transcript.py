"""Run ``crystalmesh memory ingest --transcript`` and stop it dead at a known point, for a kill -9 test.

    python -m tests.support.sessions.fault_transcript between|inside -- <crystalmesh args>

``between``: once the first chunk's transaction has committed (its turns and its cursor), this
prints ``PAUSED`` on stdout and blocks reading stdin. ``inside``: when the second chunk's turn
rows and cursor are written but not yet committed, the same. The test kills the process there
with SIGKILL. The product carries no hook: this launcher wraps ``store_chunk`` / ``write_chunk``
of ``node.memory.transcripts.ingest`` and hands over to ``node.cli.main``.
"""

from __future__ import annotations

import sys
from typing import Any

from node.memory.transcripts import ingest


def pause() -> None:
    sys.stdout.write("PAUSED\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the test kills this process


def main(argv: list[str]) -> int:
    mode = argv[1]
    calls = [0]
    if mode == "between":
        real_store = ingest.store_chunk

        def store_then_pause(*args: Any) -> Any:
            result = real_store(*args)
            pause()
            return result

        ingest.store_chunk = store_then_pause  # type: ignore[assignment]
    else:
        real_write = ingest.write_chunk

        def write_then_pause(*args: Any) -> int:
            added = real_write(*args)
            calls[0] += 1
            if calls[0] == 2:
                pause()
            return added

        ingest.write_chunk = write_then_pause  # type: ignore[assignment]
    from node.cli.main import main as crystalmesh

    return crystalmesh(argv[argv.index("--") + 1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
