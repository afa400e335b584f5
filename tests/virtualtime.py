"""An asyncio event loop on virtual time, for tests of code that times itself on the loop's clock.

``loop.time()`` starts at 0 and moves only when nothing is ready to run: it then jumps straight
to the next timer, so ``asyncio.sleep``, ``asyncio.timeout`` and call_later fire at once, in
order, at exactly the times they asked for (with dyadic values like 0.25 or 1.5 the float
arithmetic is exact, so tests can assert equality). Sockets and the self-pipe of worker threads
are still polled on every turn, and with no timer left the loop blocks on them as usual.

    batches = run_virtual(scenario)   # scenario: an async function; returns its result
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """Polls without blocking; a wait for a timer moves the loop's clock instead."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only I/O (a worker thread's wake-up) can come
            blocked: list[tuple[selectors.SelectorKey, int]] = super().select(None)
            return blocked
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


def run_virtual(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` to completion on a fresh VirtualTimeLoop and fail if it leaves a task
    running (as the suite's ``_no_leftover_tasks`` does for the ordinary loop)."""

    async def checked() -> T:
        result = await main()
        await asyncio.sleep(0)
        leftover = asyncio.all_tasks() - {asyncio.current_task()}
        if leftover:
            raise AssertionError(f"asyncio tasks left running: {sorted(map(repr, leftover))}")
        return result

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(checked())
