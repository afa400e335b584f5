"""A token bucket (golang.org/x/time/rate semantics), shared by the kube client and work queues.

Tokens refill at ``qps`` per second up to ``burst``. :meth:`TokenBucket.reserve` takes a token
now, possibly going into debt, and returns how long the caller must wait before using it; debt is
what makes waiters queue fairly without a background task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self, *, qps: float, burst: int, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        if burst < 1 and qps > 0:
            raise ValueError("burst must be >= 1")
        self.qps = qps
        self.burst = burst
        self._monotonic = monotonic
        self._tokens = float(burst)
        self._last = monotonic()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take one token; returns the seconds to wait before acting on it (0 if available)."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token only if one is available right now."""
        if self.unlimited:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a token. A cancelled waiter keeps its debt: the budget stays conservative."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
