import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.aio import FakeClock, RealClock


def test_real_clock_is_aware_utc():
    clock = RealClock()
    now = clock.now()
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)
    assert clock.monotonic() <= clock.monotonic()


def test_fake_clock_rejects_naive_start():
    with pytest.raises(ValueError, match="aware"):
        FakeClock(datetime(2026, 1, 1))  # noqa: DTZ001 -- the point of the test


async def test_fake_clock_steps_wall_and_monotonic():
    start = datetime(2026, 3, 1, tzinfo=UTC)
    clock = FakeClock(start)
    clock.step(90)
    assert clock.now() == start + timedelta(seconds=90)
    assert clock.monotonic() == 90
    clock.set(start + timedelta(hours=1))
    assert clock.monotonic() == 3600
    with pytest.raises(ValueError):
        clock.step(-1)


async def test_fake_clock_wakes_sleepers_in_deadline_order():
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(sleeper("late", 10))
        tg.create_task(sleeper("early", 5))
        tg.create_task(sleeper("never-before-20", 20))
        await asyncio.sleep(0)
        assert clock.sleepers == 3
        clock.step(4)
        await asyncio.sleep(0)
        assert woke == []
        clock.step(6)  # t=10: both due
        for _ in range(3):
            await asyncio.sleep(0)
        assert woke == ["early", "late"]
        clock.step(10)
    assert woke == ["early", "late", "never-before-20"]
    assert clock.sleepers == 0


async def test_fake_clock_cancelled_sleeper_is_dropped():
    clock = FakeClock()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(clock.sleep(5))
        await asyncio.sleep(0)
        task.cancel()
    assert clock.sleepers == 0
    clock.step(10)  # must not touch the cancelled future


async def test_fake_clock_zero_sleep_is_a_checkpoint():
    clock = FakeClock()
    await clock.sleep(0)
    assert clock.sleepers == 0
