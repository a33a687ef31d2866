"""Keep a node's subsystems running: a subsystem that raises is logged and restarted.

A bug or an unexpected input in one long-running task (trust rounds, the
settlement engine, periodic index saves and consolidation) must not take the
whole node down with it. ``supervise`` runs the task; if it raises, the error
is logged with its traceback, counted, and the task is started again after a
back-off that doubles up to ``max_backoff_s``. A task that fails before it has
started even once raises to the caller: that is a configuration error, and a
node that cannot start a subsystem should say so at start-up. Cancellation
always passes through.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

log = logging.getLogger(__name__)


async def supervise(
    name: str,
    run: Callable[..., Awaitable[None]],
    *args: Any,
    startable: bool = False,
    min_backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
    on_crash: Callable[[str, BaseException], None] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``run(*args)`` until it returns, restarting it when it raises.

    ``startable``: ``run`` takes ``task_status`` (``nursery.start`` style); our own
    ``task_status.started()`` is then reported after its first start.
    """
    backoff_s = min_backoff_s
    started = False
    while True:
        try:
            async with trio.open_nursery() as nursery:
                if startable:
                    await nursery.start(run, *args)
                else:
                    nursery.start_soon(run, *args)
                if not started:
                    started = True
                    task_status.started()
            return
        except Exception as error:
            if not started:
                raise
            log.exception("subsystem crashed, restarting name=%s in %.1fs", name, backoff_s)
            if on_crash is not None:
                on_crash(name, error)
            await trio.sleep(backoff_s)
            backoff_s = min(max_backoff_s, backoff_s * 2)
