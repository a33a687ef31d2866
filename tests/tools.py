"""Small helpers shared by the suite: missing tools fail under CI, condition waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")


def in_ci() -> bool:
    """True when ``CI`` is set to a true value (GitHub Actions and most CIs set ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_tool(reason: str, *, module_level: bool = False) -> NoReturn:
    """Skip locally when a tool (anvil, a browser, solc) is missing; fail under ``CI=true``.

    A CI run must not go green by skipping the chain or browser tests.
    """
    if in_ci():
        pytest.fail(f"required tool missing under CI=true: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def wait_until(
    condition: Callable[[], T | None], timeout_s: float = 30.0, what: str = "condition",
    interval_s: float = 0.05,
) -> T:
    """Poll ``condition`` until it returns a truthy value (returned); fail after ``timeout_s``.

    Exceptions raised by ``condition`` count as "not yet" and are reported on timeout,
    so a node API that resets a connection under load is simply read again.
    """
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
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}{detail}")
        time.sleep(interval_s)
