"""Single flight: concurrent callers asking for the same key share one run of the work.

A cache that misses under load must not send one request per caller (a thundering herd: every
NodeClaim in flight at start-up loading the whole instance-type catalogue). :class:`SingleFlight`
runs ``load`` for the first caller of a key, the *leader*; callers arriving while it runs wait for
its outcome and get the same value or the same exception. The next call after the flight ends
starts a new one: caching a value is the caller's business, this only merges concurrent loads.

The work runs in the leader's own task, so it has the leader's owner and no task is spawned.
Cancellation is safe both ways: a waiter that is cancelled leaves the flight running for the
others, and when the leader is cancelled its waiters do not inherit the ``CancelledError``: the
first of them to wake up leads a new flight and the rest wait for that one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _LeaderCancelled(Exception):
    """Set on a flight whose leader was cancelled: its waiters start over."""


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._flights: dict[K, asyncio.Future[V]] = {}
        self.loads = 0  # how many times ``load`` ran (tests and statistics)

    def in_flight(self, key: K) -> bool:
        return key in self._flights

    async def do(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """``load()``'s result (or exception), shared with every concurrent caller of ``key``."""
        while (flight := self._flights.get(key)) is not None:
            try:
                # shield: cancelling this waiter must not cancel the flight the others share.
                return await asyncio.shield(flight)
            except _LeaderCancelled:
                continue
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        self.loads += 1
        try:
            value = await load()
        except asyncio.CancelledError:
            self._settle(key, flight, _LeaderCancelled())
            raise
        except BaseException as exc:
            self._settle(key, flight, exc)
            raise
        self._flights.pop(key, None)
        flight.set_result(value)
        return value

    def _settle(self, key: K, flight: asyncio.Future[V], exc: BaseException) -> None:
        self._flights.pop(key, None)
        flight.set_exception(exc)
        # Retrieved here so a flight nobody waited on does not log "exception never retrieved";
        # waiters still receive it.
        flight.exception()
