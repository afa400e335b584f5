"""run_workers reports each reconcile by controller-runtime's result and the queue's state."""

from __future__ import annotations

import asyncio

from karpenter_py.controllers.runtime import Result, new_queue, run_workers
from karpenter_py.kube.errors import ConflictError
from karpenter_py.obs.metrics import RECONCILE_RESULTS, Metrics
from tests.unit.obs.exposition import scrape, value

NAME = "test.controller"


class Reconciler:
    """ok-* succeed, later-* ask to be requeued after a delay, bad-* raise, stale-* conflict."""

    name = NAME

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: list[str] = []
        self.all_seen = asyncio.Event()

    async def reconcile(self, key: str) -> Result | None:
        self.seen.append(key)
        if len(self.seen) == self.expected:
            self.all_seen.set()
        await asyncio.sleep(0)
        if key.startswith("bad"):
            raise RuntimeError("boom")
        if key.startswith("stale"):
            raise ConflictError(status=409, message="the object has been modified")
        if key.startswith("later"):
            return Result(requeue_after=60.0)
        return None


async def test_reconcile_totals_by_result_and_queue_counters() -> None:
    keys = ["ok-1", "ok-2", "ok-3", "bad-1", "stale-1", "later-1"]
    reconciler, queue, metrics = (
        Reconciler(len(keys)),
        new_queue(NAME, base=60.0, maximum=60.0),
        Metrics(),
    )
    for key in keys:
        queue.add(key)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_workers(reconciler, queue, workers=3, metrics=metrics))
        await reconciler.all_seen.wait()
        for _ in range(5):
            await asyncio.sleep(0)
        queue.close()  # drops the pending retries; run_workers returns and reports once more

    s = scrape(metrics)
    total = {
        result: value(s, "controller_runtime_reconcile_total", controller=NAME, result=result)
        for result in RECONCILE_RESULTS
    }
    assert total == {"success": 3, "error": 1, "requeue": 1, "requeue_after": 1}
    assert value(s, "controller_runtime_reconcile_errors_total", controller=NAME) == 1
    assert value(s, "controller_runtime_reconcile_time_seconds_count", controller=NAME) == 6
    wq = {"name": NAME, "controller": NAME}
    assert value(s, "workqueue_work_duration_seconds_count", **wq) == 6
    assert value(s, "workqueue_adds_total", **wq) == 6
    assert value(s, "workqueue_retries_total", **wq) == 2
    assert value(s, "workqueue_depth", **wq) == 0
    assert value(s, "workqueue_unfinished_work_seconds", **wq) == 0
    assert value(s, "workqueue_longest_running_processor_seconds", **wq) == 0


class Stuck:
    name = NAME

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def reconcile(self, key: str) -> Result | None:
        self.started.set()
        await self.release.wait()
        return None


async def test_periodic_reports_show_work_in_progress() -> None:
    reconciler, queue, metrics = Stuck(), new_queue(NAME), Metrics()
    queue.add("a")
    queue.add("b")
    wq = {"name": NAME, "controller": NAME}
    async with asyncio.TaskGroup() as tg:
        tg.create_task(
            run_workers(reconciler, queue, workers=1, metrics=metrics, report_interval=0.01)
        )
        await reconciler.started.wait()
        await asyncio.sleep(0.05)
        s = scrape(metrics)
        assert value(s, "workqueue_depth", **wq) == 1  # "b" waits behind the stuck "a"
        longest = value(s, "workqueue_longest_running_processor_seconds", **wq)
        assert longest is not None
        assert longest > 0
        assert value(s, "workqueue_unfinished_work_seconds", **wq) == longest
        reconciler.release.set()
        queue.close()
    s = scrape(metrics)
    assert value(s, "controller_runtime_reconcile_total", controller=NAME, result="success") == 2


async def test_without_metrics_nothing_is_reported() -> None:
    reconciler, queue = Reconciler(1), new_queue(NAME)
    queue.add("ok")
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_workers(reconciler, queue, workers=1))
        await reconciler.all_seen.wait()
        queue.close()
    assert reconciler.seen == ["ok"]
