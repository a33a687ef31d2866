"""node.supervisor: a crashing subsystem is restarted with back-off; the rest keeps running."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from node.supervisor import supervise


async def test_crashing_subsystem_is_restarted_and_siblings_survive(
        autojump_clock: trio.testing.MockClock) -> None:
    runs: list[int] = []
    crashes: list[str] = []
    sibling_ticks = 0

    async def flaky() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise RuntimeError("boom")
        await trio.sleep_forever()

    async def sibling() -> None:
        nonlocal sibling_ticks
        while True:
            await trio.sleep(1)
            sibling_ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sibling)
        await nursery.start(lambda task_status: supervise(
            "flaky", flaky, on_crash=lambda name, error: crashes.append(name),
            task_status=task_status))
        await trio.sleep(10)
        assert len(runs) == 3 and crashes == ["flaky", "flaky"]
        assert sibling_ticks >= 9
        nursery.cancel_scope.cancel()


async def test_startable_subsystem_failing_at_start_raises() -> None:
    async def broken(task_status: object = trio.TASK_STATUS_IGNORED) -> None:
        raise ValueError("bad config")

    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="bad config"), flatten_subgroups=True):
        await supervise("broken", broken, startable=True)
