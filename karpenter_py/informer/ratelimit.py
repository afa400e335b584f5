"""Per-key requeue delays (client-go's workqueue rate limiters).

The default combines, by taking the larger delay, a per-key exponential backoff (5 ms doubling to
1000 s: one failing object backs off on its own) and a global token bucket (10 qps, burst 100:
many failing objects together cannot hammer the apiserver).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from karpenter_py.aio.tokenbucket import TokenBucket

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[K_contra]):
    def when(self, key: K_contra) -> float:
        """Seconds to wait before the key's next attempt; records the attempt."""
        ...

    def forget(self, key: K_contra) -> None:
        """The key succeeded: reset its history."""
        ...

    def num_requeues(self, key: K_contra) -> int: ...


class ItemExponentialRateLimiter(Generic[K]):
    """``base * 2**failures``, capped at ``maximum``, tracked per key."""

    def __init__(self, *, base: float = 0.005, maximum: float = 1000.0) -> None:
        if base <= 0 or maximum < base:
            raise ValueError("need 0 < base <= maximum")
        self.base = base
        self.maximum = maximum
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        if n >= 64:  # 2**64 * base overflows any sensible cap; skip the float math
            return self.maximum
        return min(self.maximum, self.base * 2.0**n)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter(Generic[K]):
    """A global token bucket: a key waits for its turn when everybody is requeueing."""

    def __init__(
        self,
        *,
        qps: float = 10.0,
        burst: int = 100,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bucket = TokenBucket(qps=qps, burst=burst, monotonic=monotonic)

    def when(self, key: K) -> float:
        return self._bucket.reserve()

    def forget(self, key: K) -> None:
        return None

    def num_requeues(self, key: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The largest delay of several limiters; each still records every attempt."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("need at least one limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        return max([limiter.when(key) for limiter in self._limiters])  # list: call every one

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(
    *,
    base: float = 0.005,
    maximum: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    monotonic: Callable[[], float] = time.monotonic,
) -> MaxOfRateLimiter[K]:
    """client-go's DefaultControllerRateLimiter."""
    return MaxOfRateLimiter(
        ItemExponentialRateLimiter[K](base=base, maximum=maximum),
        BucketRateLimiter[K](qps=qps, burst=burst, monotonic=monotonic),
    )
