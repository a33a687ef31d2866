"""Run ``crystalmesh backup`` and stop it dead at a known point, for a kill -9 test.

    python -m tests.support.fault_backup -- <crystalmesh args>

When the backup writes its first encrypted chunk (the archive is then half-written
beside its final name, not yet renamed over it), this prints ``PAUSED`` on stdout
and blocks reading stdin: the test kills the process there with SIGKILL. The
product package carries no hook: this launcher wraps ``EncryptingWriter._push``
and hands over to ``node.cli.main``.
"""

from __future__ import annotations

import sys
from typing import Any

from node.ops.archive import EncryptingWriter


def main(argv: list[str]) -> int:
    real = EncryptingWriter._push

    def pause(self: EncryptingWriter, *args: Any) -> None:
        real(self, *args)
        self._out.flush()
        sys.stdout.write("PAUSED\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the test kills this process

    EncryptingWriter._push = pause  # type: ignore[method-assign]
    from node.cli.main import main as crystalmesh

    return crystalmesh(argv[argv.index("--") + 1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
