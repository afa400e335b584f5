import asyncio

import pytest

from karpenter_py.aio import Batcher

IDLE = 0.05
MAX = 0.2


def test_rejects_bad_windows():
    with pytest.raises(ValueError):
        Batcher[str](idle=0, max_window=1)
    with pytest.raises(ValueError):
        Batcher[str](idle=2, max_window=1)


async def test_waits_until_first_trigger():
    batcher = Batcher[str](idle=IDLE, max_window=MAX)
    async with asyncio.TaskGroup() as tg:
        waiter = tg.create_task(batcher.wait())
        await asyncio.sleep(MAX * 2)
        assert not waiter.done()  # nothing triggered: keeps waiting
        batcher.trigger("a")
    assert waiter.result() == ("a",)


async def test_idle_window_closes_batch_and_dedups_in_trigger_order():
    batcher = Batcher[str](idle=IDLE, max_window=10)
    for key in ("b", "a", "b", "c", "a"):
        batcher.trigger(key)
    batch = await batcher.wait()
    assert batch == ("b", "a", "c")
    assert batcher.statistics().pending == 0
    assert batcher.statistics().batches == 1


async def test_triggers_inside_idle_window_extend_the_batch():
    batcher = Batcher[int](idle=0.1, max_window=10)

    async def feed() -> None:
        for i in range(5):
            batcher.trigger(i)
            await asyncio.sleep(0.02)  # well inside the idle window

    async with asyncio.TaskGroup() as tg:
        tg.create_task(feed())
        batch = await batcher.wait()
    assert batch == (0, 1, 2, 3, 4)


async def test_max_window_caps_a_never_idle_stream():
    batcher = Batcher[int](idle=IDLE, max_window=MAX)
    stop = asyncio.Event()

    async def feed() -> None:
        i = 0
        while not stop.is_set():
            batcher.trigger(i)
            i += 1
            await asyncio.sleep(IDLE / 5)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(feed())
        first = await batcher.wait()  # must return although triggers never pause
        second = await batcher.wait()
        stop.set()
    assert len(first) > 1
    assert second
    assert set(first).isdisjoint(second)


async def test_trigger_during_processing_goes_to_next_batch():
    batcher = Batcher[str](idle=IDLE, max_window=MAX)
    batcher.trigger("x")
    assert await batcher.wait() == ("x",)
    batcher.trigger("y")
    assert await batcher.wait() == ("y",)
