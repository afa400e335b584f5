"""Time as an injected dependency.

Wall-clock reads are decisions' inputs (expiry, liveness, event timestamps), so they come from a
:class:`Clock` passed in by the caller. :class:`RealClock` is the only code in the project that
reads the wall clock; tests use :class:`FakeClock` and move time with :meth:`FakeClock.step`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Role: a source of wall time (aware UTC), monotonic time and sleeps measured on it."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The process clock. Sleeps go through the event loop (so looptime can fake them)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to.

    ``sleep`` parks the caller until :meth:`step` moves time past its deadline, so a test can
    drive timers deterministically without real waiting. Sleepers wake in deadline order.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start if start is not None else datetime(2026, 1, 1, tzinfo=UTC)
        if self._start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._elapsed = 0.0
        self._seq = itertools.count()  # tie-breaker so equal deadlines keep FIFO order
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)  # still a checkpoint, like asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._seq), fut))
        try:
            await fut
        finally:
            fut.cancel()  # no-op when woken; marks an abandoned entry so step() skips it

    @property
    def sleepers(self) -> int:
        """Number of tasks currently parked in :meth:`sleep`."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def step(self, seconds: float) -> None:
        """Advance time and wake every sleeper whose deadline has passed."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def set(self, when: datetime) -> None:
        """Jump to an absolute wall time (not backwards)."""
        self.step((when - self.now()).total_seconds())
