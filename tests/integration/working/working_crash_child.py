"""Child process for test_working_crash: runs notes or a dream and SIGKILLs itself at step N.

Test-only fault injection: the durable steps (``os.fsync``, ``os.replace``, ``os.unlink``)
and the store write (``Memory.add_crystals``, before and after) are counted, and the
process kills itself with SIGKILL just before step ``kill_at``. It prints ``ACK <text>``
after each note returns and ``STEPS <n>`` when it finishes without being killed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from node.config import load_config
from node.memory.facade import Memory
from node.memory.working.backend import MemoryBackend
from node.memory.working.working import WorkingMemory

steps = 0
kill_at = 0


def step() -> None:
    global steps
    steps += 1
    if steps == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


def counted(function: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        step()
        return function(*args, **kwargs)

    return wrapper


def main() -> None:
    global kill_at
    mode, data_dir, kill_at_text, *texts = sys.argv[1:]
    kill_at = int(kill_at_text)
    memory = Memory(load_config(Path(data_dir)))
    working = WorkingMemory(Path(data_dir), MemoryBackend(memory))
    os.fsync = counted(os.fsync)
    os.replace = counted(os.replace)
    os.unlink = counted(os.unlink)
    add_crystals = Memory.add_crystals

    def add_and_step(self: Memory, *args: Any, **kwargs: Any) -> Any:
        step()
        result = add_crystals(self, *args, **kwargs)
        step()
        return result

    Memory.add_crystals = add_and_step  # type: ignore[method-assign]
    if mode == "note":
        for text in texts:
            working.note(text, 0.8)
            print("ACK", text, flush=True)
    else:
        print("DREAM", working.dream().status, flush=True)
    print("STEPS", steps, flush=True)
    os._exit(0)  # no clean close: the parent checks what is on disk, as after a crash


if __name__ == "__main__":
    main()
