import asyncio
from collections.abc import Awaitable, Sequence

import pytest

from karpenter_py.aio import Batcher, CallBatcher

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


# ------------------------------------------------------------------ CallBatcher


class Doubler:
    """An ``execute`` that doubles each item, answers a negative one with its own error and
    records every batch it was given."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.batches: list[tuple[str, list[int]]] = []
        self.fail = fail

    async def __call__(self, bucket: str, items: Sequence[int]) -> list[int | Exception]:
        self.batches.append((bucket, list(items)))
        if self.fail is not None:
            raise self.fail
        return [ValueError(f"negative {i}") if i < 0 else 2 * i for i in items]


async def gather_each(*calls: Awaitable[int]) -> list[int | str]:
    """Each call's result, or its error's message."""

    async def one(call: Awaitable[int]) -> int | str:
        try:
            return await call
        except Exception as exc:
            return str(exc)

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(c)) for c in calls]
    return [t.result() for t in tasks]


def test_call_batcher_rejects_bad_windows():
    with pytest.raises(ValueError):
        CallBatcher(Doubler(), idle=0, max_window=1, max_items=1)
    with pytest.raises(ValueError):
        CallBatcher(Doubler(), idle=0.1, max_window=1, max_items=0)


async def test_concurrent_calls_of_a_bucket_share_one_execute_and_get_their_own_answers():
    execute = Doubler()
    b: CallBatcher[str, int, int] = CallBatcher(execute, idle=IDLE, max_window=MAX, max_items=10)
    got = await gather_each(b.call("x", 1), b.call("y", 5), b.call("x", -2), b.call("x", 3))
    assert got == [2, 10, "negative -2", 6]
    assert sorted(execute.batches) == [("x", [1, -2, 3]), ("y", [5])]
    assert b.calls == 2


async def test_an_execute_that_raises_fails_every_caller_of_its_batch():
    b: CallBatcher[str, int, int] = CallBatcher(
        Doubler(fail=RuntimeError("throttled")), idle=IDLE, max_window=MAX, max_items=10
    )
    assert await gather_each(b.call("x", 1), b.call("x", 2)) == ["throttled", "throttled"]


async def test_max_items_closes_the_window_early():
    execute = Doubler()
    b: CallBatcher[str, int, int] = CallBatcher(execute, idle=10, max_window=10, max_items=2)
    async with asyncio.timeout(1):  # the idle window of 10 s never has to pass
        assert await gather_each(b.call("x", 1), b.call("x", 2)) == [2, 4]
    assert execute.batches == [("x", [1, 2])]


async def test_a_follower_asks_again_when_the_leader_is_cancelled():
    execute = Doubler()
    b: CallBatcher[str, int, int] = CallBatcher(execute, idle=IDLE, max_window=MAX, max_items=10)
    async with asyncio.TaskGroup() as tg:
        leader = tg.create_task(b.call("x", 1))
        await asyncio.sleep(0)
        follower = tg.create_task(b.call("x", 2))
        await asyncio.sleep(0)
        leader.cancel()
    assert leader.cancelled()
    assert follower.result() == 4
    assert execute.batches == [("x", [2])]


class Slow:
    """An ``execute`` that answers after ``release`` is set: ``results`` then errors."""

    def __init__(self, results: list[int]) -> None:
        self.results = results
        self.release = asyncio.Event()

    async def __call__(self, bucket: str, items: Sequence[int]) -> list[int | Exception]:
        await self.release.wait()
        out: list[int | Exception] = [*self.results[: len(items)]]
        return out + [LookupError("none left")] * (len(items) - len(out))


@pytest.mark.parametrize(
    ("results", "answers", "unclaimed"),
    [
        # 3 asked, 3 came: the one whose caller went away is left over.
        ([10, 11, 12], [10, 11], [("x", [12])]),
        # 3 asked, 2 came: both go to the callers still waiting.
        ([10, 11], [10, 11], []),
        # 3 asked, 1 came: the first caller still waiting gets it, the other hears the error.
        ([10], [10, "none left"], []),
    ],
)
async def test_interchangeable_results_go_to_the_callers_still_waiting(
    results: list[int], answers: list[int | str], unclaimed: list[tuple[str, list[int]]]
):
    execute = Slow(results)
    left: list[tuple[str, list[int]]] = []
    b: CallBatcher[str, int, int] = CallBatcher(
        execute,
        idle=IDLE,
        max_window=MAX,
        max_items=3,
        interchangeable=True,
        unclaimed=lambda bucket, rest: left.append((bucket, list(rest))),
    )
    async with asyncio.TaskGroup() as tg:
        calls = [tg.create_task(gather_each(b.call("x", i))) for i in range(3)]
        for _ in range(10):
            await asyncio.sleep(0)  # the window closed at 3 items; the call is in flight
        calls[1].cancel()  # a follower goes away mid-call
        execute.release.set()
    assert calls[1].cancelled()
    assert [x for c in (calls[0], calls[2]) for x in c.result()] == answers
    assert left == unclaimed
