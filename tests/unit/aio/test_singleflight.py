"""SingleFlight: one load per key for concurrent callers; errors shared; cancellation of the leader
or of a waiter leaves the others with a result."""

from __future__ import annotations

import asyncio

import pytest

from karpenter_py.aio import SingleFlight


class Loader:
    """``load()`` blocks until ``release`` is set, then answers ``value-<n>`` for its n-th run or
    raises ``error`` (when set)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.runs = 0

    async def load(self) -> str:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return f"value-{self.runs}"


async def started(tasks: list[asyncio.Task[str]], loader: Loader) -> None:
    """Let every task reach the flight (the leader into ``load``, the rest into the wait)."""
    await loader.started.wait()
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)


@pytest.mark.parametrize("callers", [1, 2, 8])
async def test_concurrent_callers_share_one_load(callers: int) -> None:
    flight, loader = SingleFlight[str, str](), Loader()
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(flight.do("catalog", loader.load)) for _ in range(callers)]
        await started(tasks, loader)
        loader.release.set()
    assert [t.result() for t in tasks] == ["value-1"] * callers
    assert (loader.runs, flight.loads, flight.in_flight("catalog")) == (1, 1, False)


async def test_the_next_call_after_a_flight_loads_again() -> None:
    flight, loader = SingleFlight[str, str](), Loader()
    loader.release.set()
    assert await flight.do("catalog", loader.load) == "value-1"
    assert await flight.do("catalog", loader.load) == "value-2"
    assert flight.loads == 2


async def test_different_keys_fly_separately() -> None:
    flight, a, b = SingleFlight[str, str](), Loader(), Loader()
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(flight.do("a", a.load)), tg.create_task(flight.do("b", b.load))]
        await started(tasks[:1], a)
        await started(tasks[1:], b)
        a.release.set()
        b.release.set()
    assert [t.result() for t in tasks] == ["value-1", "value-1"]
    assert (a.runs, b.runs, flight.loads) == (1, 1, 2)


async def test_an_error_reaches_every_caller_of_the_flight() -> None:
    error = ValueError("DescribeInstanceTypes returned nothing")
    flight, loader = SingleFlight[str, str](), Loader(error)

    async def outcome() -> str | BaseException:
        try:
            return await flight.do("catalog", loader.load)
        except ValueError as e:
            return e

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(outcome()) for _ in range(3)]
        await loader.started.wait()
        await asyncio.sleep(0)
        loader.release.set()
    assert [t.result() is error for t in tasks] == [True, True, True]
    assert (loader.runs, flight.in_flight("catalog")) == (1, False)


async def test_a_cancelled_leader_hands_the_load_to_a_waiter() -> None:
    flight, loader = SingleFlight[str, str](), Loader()
    async with asyncio.TaskGroup() as tg:
        leader = tg.create_task(flight.do("catalog", loader.load))
        await loader.started.wait()
        waiters = [tg.create_task(flight.do("catalog", loader.load)) for _ in range(3)]
        await asyncio.sleep(0)
        loader.started.clear()
        leader.cancel()
        await started(waiters, loader)  # the second load, led by a waiter, the others joined
        loader.release.set()
    assert leader.cancelled()
    # One waiter led the second load; the other two shared it. None saw a CancelledError.
    assert [w.result() for w in waiters] == ["value-2"] * 3
    assert (loader.runs, flight.loads) == (2, 2)


async def test_a_cancelled_waiter_leaves_the_flight_to_the_others() -> None:
    flight, loader = SingleFlight[str, str](), Loader()
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(flight.do("catalog", loader.load)) for _ in range(3)]
        await started(tasks, loader)
        tasks[1].cancel()
        await asyncio.sleep(0)
        loader.release.set()
    assert tasks[1].cancelled()
    assert [tasks[0].result(), tasks[2].result()] == ["value-1", "value-1"]
    assert loader.runs == 1
