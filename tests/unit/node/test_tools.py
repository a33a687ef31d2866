"""tests/support: a missing tool skips locally and fails under CI=true; the condition waits."""

from __future__ import annotations

import pytest

from tests.support.tools import missing_tool
from tests.support.wait import wait_until, wait_until_async


def test_missing_tool_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="anvil missing"):
        missing_tool("anvil missing")


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_missing_tool_fails_under_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="required tool missing under CI=true: anvil"):
        missing_tool("anvil missing")


def test_wait_until_retries_errors_and_reports_the_last() -> None:
    calls = iter([ConnectionResetError("reset by peer"), None, "ready"])

    def probe() -> str | None:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_until(probe, timeout_s=30, interval_s=0) == "ready"
    with pytest.raises(TimeoutError, match="last error: ConnectionResetError"):
        wait_until(lambda: (_ for _ in ()).throw(ConnectionResetError()), timeout_s=0.05)


async def test_wait_until_async_awaits_the_condition_and_reports_the_last_error() -> None:
    calls = iter([ConnectionResetError("reset by peer"), 0, "ready"])

    async def probe() -> object:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    assert await wait_until_async(probe, timeout_s=30, interval_s=0) == "ready"
    assert await wait_until_async(lambda: 7, timeout_s=1) == 7
    with pytest.raises(TimeoutError, match=r"the thing.*last error: ConnectionResetError"):
        await wait_until_async(lambda: (_ for _ in ()).throw(ConnectionResetError()), 0.05, "the thing")
