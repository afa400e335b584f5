"""The provisioning batcher: collect triggers into one batch per idle/max window.

Upstream's ``provisioning.Batcher``: pods arriving in a burst should be solved together, so after
the first trigger we keep waiting while triggers keep coming, at most ``idle`` seconds between
them and ``max_window`` seconds in total. Keys are deduplicated; order of first trigger is kept so
batches are deterministic. Timing uses the event loop clock, so looptime can fake it in tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


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
    def __init__(self, *, idle: float = 1.0, max_window: float = 10.0) -> None:
        if idle <= 0 or max_window < idle:
            raise ValueError("need 0 < idle <= max_window")
        self.idle = idle
        self.max_window = max_window
        self._keys: dict[K, None] = {}  # insertion-ordered set
        self._triggered = asyncio.Event()
        self._batches = 0

    def trigger(self, key: K) -> None:
        """Add a key to the next batch (sync: safe to call from informer sinks)."""
        self._keys[key] = None
        self._triggered.set()

    async def wait(self) -> tuple[K, ...]:
        """Block until a batch is ready and return its keys.

        Waits indefinitely for a first trigger; then returns once no trigger arrived for ``idle``
        seconds or ``max_window`` seconds passed since the window opened. Keys triggered while the
        caller processes a batch go into the next one.
        """
        while not self._keys:
            self._triggered.clear()
            await self._triggered.wait()
        await wait_quiet(self._triggered, idle=self.idle, max_window=self.max_window)
        batch = tuple(self._keys)
        self._keys.clear()
        self._triggered.clear()
        self._batches += 1
        return batch

    def statistics(self) -> BatcherStatistics:
        return BatcherStatistics(pending=len(self._keys), batches=self._batches)
