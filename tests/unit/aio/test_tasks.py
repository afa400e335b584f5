import asyncio

from karpenter_py.aio import bounded, cancel_and_wait


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
