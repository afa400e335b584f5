"""Jittered exponential backoff, the shape client-go's reflector uses (0.8 s doubling to 30 s)."""

from __future__ import annotations

import random


class Backoff:
    """Successive delays ``initial * factor**n`` capped at ``maximum``, each stretched by up to
    ``jitter`` of itself so that many clients failing together do not retry together."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or jitter < 0:
            raise ValueError("need 0 < initial <= maximum, factor >= 1, jitter >= 0")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        self._current = initial
        self.attempts = 0

    def next(self) -> float:
        """The delay to wait before the next attempt; grows the following one."""
        base = self._current
        self._current = min(self.maximum, self._current * self.factor)
        self.attempts += 1
        return min(self.maximum, base + base * self.jitter * self._rng.random())

    def reset(self) -> None:
        self._current = self.initial
        self.attempts = 0
