"""Progress of a long MCP tool call, for a client that asked for it (a ``progressToken``).

MCP hosts time a tool call out when nothing arrives for a while (often 60 s); a purchase
that waits for a chain, a dream that waits for an LLM or a transcript of thousands of
messages can take longer. A client that sends a ``progressToken`` gets
``notifications/progress`` at every step this process can see, and a heartbeat every
``HEARTBEAT_S`` while one long call to the node is under way, so it knows the call is
alive. A client without a token gets nothing (the SDK's ``Context.report_progress`` is a
no-op then), and a client that went away never fails the tool: a progress send that
raises is logged once and the reporter falls silent.

Use it in a tool (the ``ctx: Context`` parameter is injected by the SDK, never part of the
tool's schema)::

    progress = Progress(ctx, total=2)
    result = await progress.during(lambda: call(...), "dreaming")   # heartbeats while waiting
    await progress.step(2, "dream written")

A blocking client method that takes a ``progress(done, total)`` callback (transcript
ingest, catalogue publish) runs on a worker thread; :meth:`Progress.from_worker` gives
it a callback that reports from that thread through the event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context

log = logging.getLogger(__name__)
T = TypeVar("T")

HEARTBEAT_S = 5.0  # well inside the 60 s hosts wait, rare enough to cost nothing
Observe = Callable[[], Awaitable[tuple[float, str] | None]]


class Progress:
    """Monotonic progress of one tool call; silent without a client token or after a send failed."""

    def __init__(self, ctx: Context[Any, Any] | None, total: float | None = None,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self._ctx = ctx
        self.total = total
        self.heartbeat_s = heartbeat_s
        self.done = 0.0
        self._sent = False
        self._silent = ctx is None

    async def report(self, done: float, message: str | None = None, total: float | None = None) -> None:
        """Report ``done`` (of ``total``, default the reporter's) if it moves forward.

        The protocol requires each progress value to exceed the last, so a value that does
        not is dropped rather than sent.
        """
        if total is not None:
            self.total = total
        if (self._sent and done <= self.done) or self._silent or self._ctx is None:
            self.done = max(self.done, done)
            return
        self.done, self._sent = done, True
        try:
            await self._ctx.report_progress(done, self.total, message)
        except Exception as error:  # a client that went away must not fail the tool
            self._silent = True
            log.info("progress not delivered (%s); no more progress for this call", error)

    async def step(self, done: float, message: str) -> None:
        """A step this process saw happen (``done`` of ``total``)."""
        await self.report(done, message)

    async def during(self, operation: Callable[[], Awaitable[T]], message: str,
                     observe: Observe | None = None) -> T:
        """Await ``operation`` (one long call to the node), reporting a heartbeat meanwhile.

        Each heartbeat moves half the remaining way towards the next whole step, so values
        keep increasing and never claim a step that was not reached. ``observe``, if given,
        may name the step reached (e.g. the purchase's state on the node) and its message.
        """
        error: Exception | None = None
        result: T | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._heartbeat, message, observe)
            try:
                result = await operation()
            except Exception as raised:  # re-raised below, outside the task group
                error = raised
            group.cancel_scope.cancel()
        if error is not None:
            raise error
        return result  # type: ignore[return-value]  # set whenever error is None

    async def _heartbeat(self, message: str, observe: Observe | None) -> None:
        started = anyio.current_time()
        floor: float = math.floor(self.done)
        while True:
            await anyio.sleep(self.heartbeat_s)
            seen = None
            if observe is not None:
                try:
                    seen = await observe()
                except Exception as error:  # an observation is a bonus, never a failure
                    log.debug("progress observation failed: %s", error)
            if seen is not None and seen[0] > floor:
                floor = seen[0]
                await self.report(floor, seen[1])
                continue
            floor = max(floor, math.floor(self.done))  # steps reported meanwhile (a batch done)
            target = floor + 1 if self.total is None else min(floor + 1, self.total)
            waited_s = anyio.current_time() - started
            await self.report(self.done + (target - self.done) / 2,
                              f"{seen[1] if seen else message} ({waited_s:.0f} s)")

    def from_worker(self) -> Callable[[float, float | None], None]:
        """A ``progress(done, total)`` callback for a blocking call on an anyio worker thread."""

        def callback(done: float, total: float | None = None) -> None:
            try:
                anyio.from_thread.run(self.report, float(done), None, total)
            except Exception as error:  # the loop is gone: the call itself will notice
                log.debug("progress from a worker thread dropped: %s", error)

        return callback
