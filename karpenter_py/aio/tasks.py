"""Helpers for TaskGroup-owned background work and cleanup that survives cancellation.

asyncio's cancellation is edge-triggered: once a timeout or cancel has fired, an ``await`` in a
``finally`` block is not interrupted again and can hang forever. Every cleanup step therefore
gets its own bound (:func:`bounded`), and stopping a task waits for it without inheriting its
exception (:func:`cancel_and_wait`). A part whose failure must not end the TaskGroup it runs in
is restarted instead (:func:`supervise`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from karpenter_py.aio.backoff import Backoff
from karpenter_py.aio.clock import Clock

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


async def bounded(aw: Awaitable[object], *, within: float, what: str = "cleanup") -> bool:
    """Await a cleanup step for at most ``within`` seconds; returns False (and logs) on timeout.

    Cancellation of the caller still propagates: only the step's own timeout is swallowed.
    """
    try:
        async with asyncio.timeout(within):
            await aw
    except TimeoutError:
        log.warning("%s did not finish within %.1fs", what, within)
        return False
    return True


async def cancel_and_wait(task: asyncio.Task[Any], *, within: float = 10.0) -> None:
    """Cancel a task (owned by some TaskGroup) and wait until it has really finished.

    ``asyncio.wait`` neither raises the task's exception nor its CancelledError here, so the task's
    owner still sees any real failure; our own cancellation propagates as usual.
    """
    if task.done():
        return
    task.cancel()
    async with asyncio.timeout(within):
        await asyncio.wait([task])


async def checkpoint() -> None:
    """Yield to the loop once (a cancellation point)."""
    await asyncio.sleep(0)


async def gather_limited(
    items: Sequence[T], step: Callable[[T], Awaitable[R]], *, limit: int
) -> list[R]:
    """``step`` on every item, at most ``limit`` at once, in a TaskGroup; the results in the
    items' order. A failing step cancels the rest and raises (as a TaskGroup does), so steps
    that must not stop each other catch their own errors."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with gate:
            return await step(item)

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(item)) for item in items]
    return [t.result() for t in tasks]


async def supervise(
    what: str,
    run: Callable[[], Awaitable[object]],
    *,
    clock: Clock,
    backoff: Backoff | None = None,
) -> None:
    """Run ``run()`` until it returns, starting it again after each failure, so that a part
    whose failure must not end its siblings can share their TaskGroup.

    A failure is logged with its traceback (``<what> failed; restarting in <n>s``) and the next
    start waits a back-off on ``clock`` (``Backoff()``: 0.8 s doubling to 30 s, jittered), which
    starts over after a run that lasted longer than its longest delay. Cancellation propagates.
    """
    delays = backoff if backoff is not None else Backoff()
    while True:
        started = clock.monotonic()
        try:
            await run()
            return
        except Exception:
            if clock.monotonic() - started > delays.maximum:
                delays.reset()
            delay = delays.next()
            log.exception("%s failed; restarting in %.1fs", what, delay)
        await clock.sleep(delay)
