import asyncio

import pytest

from karpenter_py.informer import (
    ItemExponentialRateLimiter,
    QueueClosedError,
    QueueEmptyError,
    WorkQueue,
)


def queue(**kw) -> WorkQueue[str]:
    return WorkQueue[str](**kw)


async def test_duplicate_adds_coalesce():
    q = queue()
    for key in ("a", "b", "a", "a", "c", "b"):
        q.add(key)
    assert len(q) == 3
    assert [q.get_nowait() for _ in range(3)] == ["a", "b", "c"]
    assert q.statistics().processing == 3


async def test_key_is_never_handed_out_twice_and_re_add_during_processing_requeues_after_done():
    q = queue()
    q.add("a")
    key = await q.get()
    assert q.is_processing("a")
    q.add("a")  # arrives while a worker holds it
    q.add("a")
    assert len(q) == 0  # not queued while processing
    with pytest.raises(QueueEmptyError):
        q.get_nowait()
    q.done(key)
    assert len(q) == 1  # exactly once more
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_re_add_does_not_requeue():
    q = queue()
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0
    assert q.statistics().processing == 0


async def test_get_blocks_until_add():
    q = queue()
    async with asyncio.TaskGroup() as tg:
        getter = tg.create_task(q.get())
        await asyncio.sleep(0.01)
        assert not getter.done()
        q.add("x")
    assert getter.result() == "x"


async def test_one_add_wakes_exactly_one_getter():
    q = queue()

    async def get_or_none() -> str | None:
        try:
            return await q.get()
        except QueueClosedError:
            return None

    async with asyncio.TaskGroup() as tg:
        getters = [tg.create_task(get_or_none()) for _ in range(3)]
        await asyncio.sleep(0)
        q.add("only")
        await asyncio.sleep(0.01)
        assert sum(1 for g in getters if g.done()) == 1
        q.close()
    assert sorted(g.result() or "" for g in getters) == ["", "", "only"]


async def test_cancelled_getter_passes_its_wakeup_on():
    q = queue()
    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(q.get())
        second = tg.create_task(q.get())
        await asyncio.sleep(0)
        q.add("k")  # wakes `first` ...
        first.cancel()  # ... which is cancelled before it can take the key
        await asyncio.sleep(0.01)
        assert second.done()
    assert second.result() == "k"


async def test_add_after_delays_and_keeps_earliest_deadline():
    q = queue()
    q.add_after("later", 0.05)
    q.add_after("soon", 0.01)
    q.add_after("soon", 0.2)  # a later deadline does not postpone the pending one
    assert len(q) == 0
    assert q.statistics().waiting == 2
    assert await q.get() == "soon"
    assert await q.get() == "later"
    q.add_after("now", 0)
    assert q.get_nowait() == "now"


async def test_add_after_earlier_deadline_replaces_pending_timer():
    q = queue()
    q.add_after("k", 10)
    q.add_after("k", 0.01)
    async with asyncio.timeout(1):
        assert await q.get() == "k"
    assert q.statistics().waiting == 0


async def test_rate_limited_backoff_grows_and_forget_resets():
    q = WorkQueue[str](rate_limiter=ItemExponentialRateLimiter(base=0.01, maximum=1.0))
    for _ in range(4):
        q.add_rate_limited("k")  # coalesces into one pending timer, records 4 failures
    assert q.num_requeues("k") == 4
    q.forget("k")
    assert q.num_requeues("k") == 0
    async with asyncio.timeout(1):
        assert await q.get() == "k"  # the first (0.01 s) timer fired


async def test_close_wakes_getters_drains_and_rejects_new_work():
    q = queue()
    q.add("left")
    q.add_after("timer", 0.01)
    q.close()
    q.add("new")
    q.add_after("x", 0.01)
    assert q.closed
    assert q.statistics().waiting == 0
    assert await q.get() == "left"  # what was queued is still handed out
    with pytest.raises(QueueClosedError):
        await q.get()
    with pytest.raises(QueueClosedError):
        q.get_nowait()
    await asyncio.sleep(0.02)
    assert len(q) == 0  # the cancelled timer never fired


async def test_close_wakes_blocked_getters():
    q = queue()

    async def scenario() -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(3):
                tg.create_task(q.get())
            await asyncio.sleep(0)
            q.close()

    with pytest.raises(ExceptionGroup) as info:
        await scenario()
    assert all(isinstance(e, QueueClosedError) for e in info.value.exceptions)
    assert len(info.value.exceptions) == 3


async def test_workers_process_each_key_once_per_add_round():
    q = queue()
    processed: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except QueueClosedError:
                return
            processed.append(key)
            await asyncio.sleep(0.001)
            q.done(key)

    async with asyncio.TaskGroup() as tg:
        for _ in range(4):
            tg.create_task(worker())
        for i in range(50):
            q.add(f"k{i % 10}")  # 10 distinct keys, heavily duplicated
        for _ in range(1000):  # bounded poll until the queue is idle
            if not (len(q) or q.statistics().processing):
                break
            await asyncio.sleep(0.005)
        q.close()
    assert sorted(set(processed)) == sorted(f"k{i}" for i in range(10))
    assert len(processed) == 10
