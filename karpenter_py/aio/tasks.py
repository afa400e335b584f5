"""Helpers for TaskGroup-owned background work and cleanup that survives cancellation.

asyncio's cancellation is edge-triggered: once a timeout or cancel has fired, an ``await`` in a
``finally`` block is not interrupted again and can hang forever. Every cleanup step therefore
gets its own bound (:func:`bounded`), and stopping a task waits for it without inheriting its
exception (:func:`cancel_and_wait`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger(__name__)


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
