import asyncio

import pytest

from karpenter_py.aio import Backoff, FakeClock, bounded, cancel_and_wait, gather_limited, supervise


async def test_bounded_returns_false_on_timeout_and_true_otherwise():
    assert await bounded(asyncio.sleep(0), within=1)
    assert not await bounded(asyncio.sleep(10), within=0.01, what="slow close")


async def test_bounded_lets_callers_cancellation_through():
    async def outer() -> None:
        await bounded(asyncio.sleep(10), within=5)

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(outer())
        await asyncio.sleep(0.01)
        task.cancel()
    assert task.cancelled()


async def test_cancel_and_wait_finishes_cleanup_and_keeps_owner_informed():
    cleaned = asyncio.Event()

    async def worker() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            await asyncio.sleep(0.01)  # cleanup that itself awaits
            cleaned.set()

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker())
        await asyncio.sleep(0)
        await cancel_and_wait(task, within=1)
        assert cleaned.is_set()
        assert task.cancelled()
        await cancel_and_wait(task)  # idempotent on a finished task


class _Gate:
    """Steps that wait on one event, counting how many run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.release = asyncio.Event()

    async def step(self, item: int) -> int:
        self.running += 1
        self.most = max(self.most, self.running)
        await self.release.wait()
        self.running -= 1
        return item * 10


@pytest.mark.parametrize(
    ("items", "limit", "most"),
    [(0, 3, 0), (1, 3, 1), (3, 3, 3), (7, 3, 3), (25, 20, 20), (5, 1, 1)],
)
async def test_gather_limited_runs_at_most_limit_and_keeps_the_items_order(
    items: int, limit: int, most: int
) -> None:
    gate = _Gate()
    task = asyncio.create_task(gather_limited(list(range(items)), gate.step, limit=limit))
    for _ in range(20):
        await asyncio.sleep(0)
    assert gate.running == most
    gate.release.set()
    assert await task == [i * 10 for i in range(items)]
    assert gate.most == most


async def test_gather_limited_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        await gather_limited([1], asyncio.sleep, limit=0)


@pytest.mark.parametrize(
    ("lifetimes", "starts"),
    [
        # Failing at once: 1 s, 2 s, 4 s, 4 s (the cap) between starts; the fifth run returns.
        ([0, 0, 0, 0, None], [0, 1, 3, 7, 11]),
        # A run that lasted longer than the longest delay starts the back-off over.
        ([0, 0, 10, 0, None], [0, 1, 3, 14, 16]),
    ],
)
async def test_supervise_restarts_a_failing_run_after_a_back_off(
    lifetimes: list[float | None], starts: list[float]
) -> None:
    clock = FakeClock()
    started: list[float] = []

    async def run() -> None:
        started.append(clock.monotonic())
        lifetime = lifetimes[len(started) - 1]
        if lifetime is None:
            return
        if lifetime:
            await clock.sleep(lifetime)
        raise RuntimeError("broken")

    backoff = Backoff(initial=1, maximum=4, jitter=0)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(supervise("part", run, clock=clock, backoff=backoff))
        while not task.done():
            for _ in range(10):  # let it reach its next sleep before time moves on
                await asyncio.sleep(0)
            clock.step(1)
    assert started == starts


async def test_supervise_lets_cancellation_through() -> None:
    clock = FakeClock()

    async def run() -> None:
        await asyncio.Event().wait()

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(supervise("part", run, clock=clock))
        await asyncio.sleep(0)
        task.cancel()
    assert task.cancelled()
