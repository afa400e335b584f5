"""Batching in idle/max windows: of triggers (:class:`Batcher`) and of calls (:class:`CallBatcher`).

Upstream's ``provisioning.Batcher``: pods arriving in a burst should be solved together, so after
the first trigger we keep waiting while triggers keep coming, at most ``idle`` seconds between
them and ``max_window`` seconds in total. Keys are deduplicated; order of first trigger is kept so
batches are deterministic. Timing uses the event loop clock, so a virtual-time loop can fake it
in tests.

Beyond upstream, ``first_window``: the first batch of a burst closes that long after the burst's
first trigger even while triggers keep coming, so what is known early launches early; the rest of
the burst gathers into the next batches under the ``idle`` / ``max_window`` rules. A ReplicaSet
creating 1,000 pods keeps the idle window open for seconds, and a whole-burst batch launched its
first node that much later than a first batch of the first pods would.

Upstream's cloud-provider batchers do the same for API calls: concurrent callers asking the same
kind of question within a window share one call (:class:`CallBatcher`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class BatcherStatistics:
    pending: int
    batches: int


async def wait_quiet(
    arrived: asyncio.Event,
    *,
    idle: float,
    max_window: float,
    closed: Callable[[], bool] = lambda: False,
) -> None:
    """Return once ``arrived`` has not been set for ``idle`` seconds, ``max_window`` seconds
    after the call, or as soon as ``closed()`` (checked after each arrival) says so.

    Clears ``arrived`` as it goes: whoever sets it only announces "one more came"."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_window
    while not closed():
        arrived.clear()
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        try:
            async with asyncio.timeout(min(idle, remaining)):
                await arrived.wait()
        except TimeoutError:
            return  # idle (or max) window elapsed with no new arrival


class Batcher(Generic[K]):
    """Triggers gathered into batches (see the module docstring).

    A burst is a run of triggers less than ``idle`` seconds apart; a trigger after ``idle``
    seconds without one starts a new burst. Its first batch closes at most ``first_window``
    seconds after that trigger (None: no early close, upstream's batching), every later batch by
    the ``idle`` / ``max_window`` rules alone. A burst that starts while the caller is busy with
    the last batch gets its early batch too: the window is measured from the burst's first
    trigger, so a batch already past it returns at once.

    ``trigger`` must be called from the event loop's thread (it reads the loop's clock)."""

    def __init__(
        self, *, idle: float = 1.0, max_window: float = 10.0, first_window: float | None = None
    ) -> None:
        if idle <= 0 or max_window < idle:
            raise ValueError("need 0 < idle <= max_window")
        if first_window is not None and first_window <= 0:
            raise ValueError("need first_window > 0")
        self.idle = idle
        self.max_window = max_window
        self.first_window = first_window
        self._keys: dict[K, None] = {}  # insertion-ordered set
        self._triggered = asyncio.Event()
        self._batches = 0
        self._last_trigger: float | None = None  # loop time of the latest trigger
        self._burst_started = 0.0  # loop time of the current burst's first trigger
        self._early = False  # the current burst has not had its first batch yet

    def trigger(self, key: K) -> None:
        """Add a key to the next batch (sync: safe to call from informer sinks)."""
        now = asyncio.get_running_loop().time()
        if self._last_trigger is None or now - self._last_trigger >= self.idle:
            self._burst_started = now
            self._early = True
        self._last_trigger = now
        self._keys[key] = None
        self._triggered.set()

    async def wait(self) -> tuple[K, ...]:
        """Block until a batch is ready and return its keys.

        Waits indefinitely for a first trigger; then returns once no trigger arrived for ``idle``
        seconds, ``max_window`` seconds after the window opened, or, for the first batch of a
        burst, ``first_window`` seconds after the burst's first trigger. Keys triggered while
        the caller processes a batch go into the next one.
        """
        while not self._keys:
            self._triggered.clear()
            await self._triggered.wait()
        window = self.max_window
        if self._early and self.first_window is not None:
            now = asyncio.get_running_loop().time()
            window = min(window, self._burst_started + self.first_window - now)
        await wait_quiet(self._triggered, idle=self.idle, max_window=window)
        batch = tuple(self._keys)
        self._keys.clear()
        self._triggered.clear()
        self._early = False
        self._batches += 1
        return batch

    def statistics(self) -> BatcherStatistics:
        return BatcherStatistics(pending=len(self._keys), batches=self._batches)


class _LeaderGone(Exception):
    """The window's leader was cancelled before its call answered; the follower asks again."""


@dataclass(slots=True)
class _Window(Generic[T, R]):
    items: list[T] = field(default_factory=list)
    waiters: list[asyncio.Future[R]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


# ``execute(bucket, items)`` answers each item in order: its result, or the exception that item's
# caller should see.
Execute = Callable[[K, Sequence[T]], Awaitable[Sequence[R | Exception]]]
Unclaimed = Callable[[K, Sequence[R]], None]


class CallBatcher(Generic[K, T, R]):
    """Concurrent calls with the same ``bucket`` that arrive within ``idle`` seconds of each
    other (at most ``max_window`` after the first, at most ``max_items``) become one
    ``execute(bucket, items)``; each caller gets the answer for its own item.

    The first caller of a window leads it: it waits out the window and makes the call itself, so
    no background task is needed. If the leader is cancelled before the answer, its followers
    ask again (one of them leads the next window); a follower that is cancelled just stops
    waiting. An exception from ``execute`` itself reaches every caller of the batch.

    ``interchangeable``: every caller of a bucket asks for one of equal things (one of N
    instances launched together), so results go to the callers still waiting, in order, before
    any error does; results no caller is left to take go to ``unclaimed(bucket, results)``."""

    def __init__(
        self,
        execute: Execute[K, T, R],
        *,
        idle: float,
        max_window: float,
        max_items: int,
        interchangeable: bool = False,
        unclaimed: Unclaimed[K, R] | None = None,
    ) -> None:
        if idle <= 0 or max_window < idle or max_items < 1:
            raise ValueError("need 0 < idle <= max_window and max_items >= 1")
        self._execute = execute
        self._interchangeable = interchangeable
        self._unclaimed = unclaimed
        self.idle = idle
        self.max_window = max_window
        self.max_items = max_items
        self._open: dict[K, _Window[T, R]] = {}
        self.calls = 0  # batched calls made

    async def call(self, bucket: K, item: T) -> R:
        while True:
            try:
                return await self._call_once(bucket, item)
            except _LeaderGone:
                continue

    async def _call_once(self, bucket: K, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        window = self._open.get(bucket)
        if window is not None and not window.closed:
            window.items.append(item)
            window.waiters.append(future)
            window.arrived.set()
            if len(window.items) >= self.max_items:
                self._close(bucket, window)
            return await future
        window = _Window(items=[item], waiters=[future])
        self._open[bucket] = window
        try:
            await wait_quiet(
                window.arrived,
                idle=self.idle,
                max_window=self.max_window,
                closed=lambda: window.closed,
            )
            self._close(bucket, window)
            await self._run(bucket, window)
        except BaseException:
            self._close(bucket, window)
            for other in window.waiters[1:]:
                if not other.done():
                    other.set_exception(_LeaderGone())
            raise
        return await future

    def _close(self, bucket: K, window: _Window[T, R]) -> None:
        window.closed = True
        window.arrived.set()
        if self._open.get(bucket) is window:
            del self._open[bucket]

    async def _run(self, bucket: K, window: _Window[T, R]) -> None:
        self.calls += 1
        try:
            answers = list(await self._execute(bucket, window.items))
        except Exception as exc:
            answers = [exc] * len(window.items)
        if len(answers) != len(window.items):  # a bug in execute: every caller hears of it
            bug = RuntimeError(f"{len(window.items)} items got {len(answers)} answers")
            answers = [bug] * len(window.items)
        if not self._interchangeable:
            for waiter, answer in zip(window.waiters, answers, strict=True):
                if not waiter.done():  # else that caller went away
                    _settle(waiter, answer)
            return
        waiting = [w for w in window.waiters if not w.done()]
        answers.sort(key=lambda a: isinstance(a, Exception))  # stable: results first
        for waiter, answer in zip(waiting, answers, strict=False):
            _settle(waiter, answer)
        left = [a for a in answers[len(waiting) :] if not isinstance(a, Exception)]
        if left and self._unclaimed is not None:
            self._unclaimed(bucket, left)


def _settle(waiter: asyncio.Future[R], answer: R | Exception) -> None:
    if isinstance(answer, Exception):
        waiter.set_exception(answer)
    else:
        waiter.set_result(answer)
