import asyncio
from collections.abc import Awaitable, Sequence

import pytest

from karpenter_py.aio import Batcher, CallBatcher
from tests.virtualtime import run_virtual

# CallBatcher tests: real windows, kept short.
CALL_IDLE = 0.05
CALL_MAX = 0.2


def test_rejects_bad_windows():
    with pytest.raises(ValueError):
        Batcher[str](idle=0, max_window=1)
    with pytest.raises(ValueError):
        Batcher[str](idle=2, max_window=1)


# Every 0.375 s (3/8: exact in binary, so batch times compare equal), never on a window's edge.
EVERY = 0.375


def stream(start: float, until: float) -> list[float]:
    """Trigger times from ``start`` every EVERY seconds, ``until`` included."""
    return [start + EVERY * k for k in range(int((until - start) / EVERY) + 1)]


async def batches_of(
    batcher: Batcher[int], triggers: list[float], *, busy: float, count: int
) -> list[tuple[float, tuple[int, ...]]]:
    """Trigger key i at ``triggers[i]`` (loop time); a caller that spends ``busy`` seconds on
    each batch takes ``count`` of them. Each batch with the loop time it was returned at."""
    loop = asyncio.get_running_loop()

    async def feed() -> None:
        for key, at in enumerate(triggers):
            await asyncio.sleep(at - loop.time())
            batcher.trigger(key)

    got: list[tuple[float, tuple[int, ...]]] = []
    async with asyncio.TaskGroup() as tg:
        tg.create_task(feed())
        for _ in range(count):
            batch = await batcher.wait()
            got.append((loop.time(), batch))
            await asyncio.sleep(busy)
    return got


# Batcher tests run on virtual time (tests.virtualtime): the loop's clock jumps to the next timer,
# so windows of whole seconds take no real time and batches close at exact instants.


def test_waits_until_first_trigger():
    async def scenario() -> tuple[bool, tuple[str, ...], float]:
        batcher = Batcher[str](idle=1, max_window=4)
        async with asyncio.TaskGroup() as tg:
            waiter = tg.create_task(batcher.wait())
            await asyncio.sleep(20)
            waiting = not waiter.done()  # nothing triggered: keeps waiting past max_window
            batcher.trigger("a")
        return waiting, waiter.result(), asyncio.get_running_loop().time()

    assert run_virtual(scenario) == (True, ("a",), 21.0)


def test_idle_window_closes_batch_and_dedups_in_trigger_order():
    async def scenario() -> tuple[tuple[str, ...], float, int, int]:
        batcher = Batcher[str](idle=1, max_window=10)
        for key in ("b", "a", "b", "c", "a"):
            batcher.trigger(key)
        batch = await batcher.wait()
        stats = batcher.statistics()
        return batch, asyncio.get_running_loop().time(), stats.pending, stats.batches

    assert run_virtual(scenario) == (("b", "a", "c"), 1.0, 0, 1)


def test_triggers_inside_idle_window_extend_the_batch():
    async def scenario() -> list[tuple[float, tuple[int, ...]]]:
        batcher = Batcher[int](idle=1, max_window=10)
        return await batches_of(batcher, [0, 0.5, 1.25, 2, 2.75], busy=0, count=1)

    assert run_virtual(scenario) == [(3.75, (0, 1, 2, 3, 4))]


def test_max_window_caps_a_never_idle_stream():
    async def scenario() -> list[tuple[float, tuple[int, ...]]]:
        batcher = Batcher[int](idle=1, max_window=2)
        return await batches_of(batcher, stream(0, 4.5), busy=0, count=2)

    # The second window opens with the next trigger (2.25) and runs its full max_window.
    assert run_virtual(scenario) == [(2.0, (0, 1, 2, 3, 4, 5)), (4.25, (6, 7, 8, 9, 10, 11))]


def test_trigger_during_processing_goes_to_next_batch():
    async def scenario() -> list[tuple[str, ...]]:
        batcher = Batcher[str](idle=1, max_window=4)
        batcher.trigger("x")
        first = await batcher.wait()
        batcher.trigger("y")
        return [first, await batcher.wait()]

    assert run_virtual(scenario) == [("x",), ("y",)]


# ------------------------------------------------------------------ first_window, on virtual time


@pytest.mark.parametrize(
    ("triggers", "max_window", "first_window", "busy", "expected"),
    [
        pytest.param(
            stream(0, 3),
            10,
            None,
            0,
            [(4.0, tuple(range(9)))],
            id="no first_window: upstream's one batch, idle after the stream",
        ),
        pytest.param(
            stream(0, 3),
            10,
            1,
            0,
            [(1.0, (0, 1, 2)), (4.0, (3, 4, 5, 6, 7, 8))],
            id="the first batch closes at first_window, the rest by idle",
        ),
        pytest.param(
            stream(0, 0.75),
            10,
            2,
            0,
            [(1.75, (0, 1, 2))],
            id="a burst shorter than first_window closes by idle as before",
        ),
        pytest.param(
            stream(0, 5.25),
            2,
            1,
            0,
            [(1.0, (0, 1, 2)), (3.125, (3, 4, 5, 6, 7, 8)), (5.375, (9, 10, 11, 12, 13, 14))],
            id="later batches of a burst are not early: each its full max_window",
        ),
        pytest.param(
            [*stream(0, 1.5), *stream(4, 5.5)],
            10,
            1,
            0,
            [(1.0, (0, 1, 2)), (2.5, (3, 4)), (5.0, (5, 6, 7)), (6.5, (8, 9))],
            id="idle seconds without a trigger re-arm the early batch for the next burst",
        ),
        pytest.param(
            [0, *stream(2, 5)],
            10,
            1,
            3,
            [(1.0, (0,)), (4.0, (1, 2, 3, 4, 5, 6)), (8.0, (7, 8, 9))],
            id="a burst that starts while the caller is busy is early from its first trigger",
        ),
        pytest.param(
            [0, *stream(2, 5)],
            10,
            None,
            3,
            [(1.0, (0,)), (6.0, (1, 2, 3, 4, 5, 6, 7, 8, 9))],
            id="the same without first_window waits for the burst's end",
        ),
    ],
)
def test_first_window_cuts_the_first_batch_of_each_burst(
    triggers: list[float],
    max_window: float,
    first_window: float | None,
    busy: float,
    expected: list[tuple[float, tuple[int, ...]]],
) -> None:
    async def scenario() -> list[tuple[float, tuple[int, ...]]]:
        batcher = Batcher[int](idle=1, max_window=max_window, first_window=first_window)
        return await batches_of(batcher, triggers, busy=busy, count=len(expected))

    assert run_virtual(scenario) == expected


def test_rejects_a_first_window_that_is_not_positive() -> None:
    with pytest.raises(ValueError):
        Batcher[str](idle=1, max_window=10, first_window=0)


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
    b: CallBatcher[str, int, int] = CallBatcher(
        execute, idle=CALL_IDLE, max_window=CALL_MAX, max_items=10
    )
    got = await gather_each(b.call("x", 1), b.call("y", 5), b.call("x", -2), b.call("x", 3))
    assert got == [2, 10, "negative -2", 6]
    assert sorted(execute.batches) == [("x", [1, -2, 3]), ("y", [5])]
    assert b.calls == 2


async def test_an_execute_that_raises_fails_every_caller_of_its_batch():
    b: CallBatcher[str, int, int] = CallBatcher(
        Doubler(fail=RuntimeError("throttled")), idle=CALL_IDLE, max_window=CALL_MAX, max_items=10
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
    b: CallBatcher[str, int, int] = CallBatcher(
        execute, idle=CALL_IDLE, max_window=CALL_MAX, max_items=10
    )
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
        idle=CALL_IDLE,
        max_window=CALL_MAX,
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
