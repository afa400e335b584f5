"""A coalescing work queue (client-go's workqueue: Type + DelayingQueue + RateLimitingQueue).

* A key is queued at most once (the *dirty* set): bursts of events for one object collapse into
  one reconcile.
* A key is never handed to two workers: while it is *processing*, a new ``add`` only marks it
  dirty, and ``done`` queues it again.
* ``add_after`` uses loop timers (``call_at`` callbacks, not tasks), keeping only the earliest
  pending deadline per key; ``add_rate_limited`` asks the rate limiter for the delay and
  ``forget`` resets that key's backoff.
* ``close`` (Python 3.11 has no ``Queue.shutdown``) drops pending timers, rejects new keys, lets
  getters drain what is queued and then raises :class:`QueueClosedError` in every getter.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from karpenter_py.informer.ratelimit import RateLimiter, default_controller_rate_limiter

K = TypeVar("K", bound=Hashable)


class QueueClosedError(Exception):
    """The queue was closed and holds nothing more to hand out."""


class QueueEmptyError(Exception):
    """``get_nowait`` found nothing queued."""


@dataclass(frozen=True, slots=True)
class QueueStatistics:
    queued: int
    processing: int
    waiting: int  # keys with a pending add_after timer
    getters: int
    closed: bool
    adds: int


class WorkQueue(Generic[K]):
    def __init__(self, *, rate_limiter: RateLimiter[K] | None = None, name: str = "") -> None:
        self.name = name
        self._limiter: RateLimiter[K] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._adds = 0

    # ------------------------------------------------------------------ producers

    def add(self, key: K) -> None:
        if self._closed or key in self._dirty:
            return
        self._adds += 1
        self._dirty.add(key)
        if key in self._processing:
            return  # re-queued by done()
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed (earliest pending deadline wins)."""
        if self._closed:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending.when() <= when:
                return
            pending.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after the rate limiter's next delay for it; returns that delay."""
        delay = self._limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._limiter.num_requeues(key)

    # ------------------------------------------------------------------ consumers

    async def get(self) -> K:
        """Wait for a key and mark it processing; the caller must call :meth:`done`."""
        while not self._queue:
            if self._closed:
                raise QueueClosedError(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # we were handed a wake-up we cannot use: pass it on
                raise
        return self._take()

    def get_nowait(self) -> K:
        if not self._queue:
            raise QueueClosedError(self.name) if self._closed else QueueEmptyError(self.name)
        return self._take()

    def _take(self) -> K:
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Finish processing ``key``; if it was added meanwhile, queue it again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # ------------------------------------------------------------------ shutdown and stats

    def close(self) -> None:
        """Stop accepting keys, drop pending timers and wake every getter."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._queue)

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def statistics(self) -> QueueStatistics:
        return QueueStatistics(
            queued=len(self._queue),
            processing=len(self._processing),
            waiting=len(self._timers),
            getters=sum(1 for g in self._getters if not g.done()),
            closed=self._closed,
            adds=self._adds,
        )
