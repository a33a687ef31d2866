"""Start the drain worker detached: its own session, no terminal, output to the capture log.

The hook that starts it returns at once; the worker outlives the hook and the host
(``start_new_session``: a host that kills its hook's process group does not kill it),
reads nothing from the host (stdin is ``/dev/null``) and writes only to the log.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from node.memory import ensure_dir, open_nofollow


def spawn_detached(argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in the background (stdout and stderr appended to ``log_path``); its pid."""
    import subprocess  # here: a SessionStart with nothing queued never pays for it

    ensure_dir(log_path.parent)
    log_fd = open_nofollow(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                                   start_new_session=True, close_fds=True, env=env)
    finally:
        os.close(log_fd)
    return process.pid
