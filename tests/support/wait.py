"""The suite's one condition wait: poll until something is true, fail after a timeout.

Tests never sleep to let something happen; they wait for the thing itself.
``wait_until`` blocks (devnet processes, a browser, a node's HTTP API);
``wait_until_async`` is the same loop inside a trio run (in-process hosts),
where the condition may also be a coroutine function.

Both return the condition's first truthy value. An exception raised by the
condition counts as "not yet" (a node API resetting a connection under load is
simply read again) and the last one is reported in the ``TimeoutError``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


def _timed_out(timeout_s: float, what: str, last_error: BaseException | None) -> TimeoutError:
    detail = f" (last error: {last_error!r})" if last_error is not None else ""
    return TimeoutError(f"timed out after {timeout_s} s waiting for {what}{detail}")


def wait_until(
    condition: Callable[[], T | None], timeout_s: float = 30.0, what: str = "condition",
    interval_s: float = 0.05,
) -> T:
    """Poll ``condition`` until it returns a truthy value (returned); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
        except Exception as error:
            last_error = error
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout_s, what, last_error)
        time.sleep(interval_s)


async def wait_until_async(
    condition: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition",
    interval_s: float = 0.01,
) -> Any:
    """``wait_until`` for a trio run: ``condition`` returns a value or an awaitable of one."""
    last_error: BaseException | None = None
    with trio.move_on_after(timeout_s):
        while True:
            try:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
            except Exception as error:
                last_error = error
            else:
                if value:
                    return value
            await trio.sleep(interval_s)
    raise _timed_out(timeout_s, what, last_error)

