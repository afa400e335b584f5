"""run_workers reports each reconcile by controller-runtime's result and the queue's state, and
logs a failed one as a WARN line when it is transient, an ERROR with its traceback otherwise."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from karpenter_py.controllers.runtime import Result, new_queue, run_workers
from karpenter_py.controllers.runtime import log as runtime_log
from karpenter_py.kube import errors as kube_errors
from karpenter_py.kube.errors import ConflictError
from karpenter_py.obs.logging import JsonFormatter
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


# ----------------------------------------------------------------------------- failure logging

THROTTLED = kube_errors.error_from_status(
    429,
    {"kind": "Status", "reason": "TooManyRequests", "message": "please try again later"},
    verb="patch",
    resource="nodeclaims",
    name="a",
)
UNAVAILABLE = kube_errors.error_from_status(
    503, b"service unavailable", verb="list", resource="pods"
)
FORBIDDEN = kube_errors.error_from_status(
    403, {"kind": "Status", "reason": "Forbidden", "message": "no"}, verb="get", resource="nodes"
)


def aws_error(code: str, status: int) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "injected"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "DescribeInstances")


class Failing:
    """Raises ``error`` on its first reconcile."""

    name = NAME

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.failed = asyncio.Event()

    async def reconcile(self, key: str) -> Result | None:
        self.failed.set()
        raise self.error


WARN_CASES = [
    (
        THROTTLED,
        "TooManyRequestsError: patch nodeclaims a: 429 TooManyRequests: please try again later",
    ),
    (UNAVAILABLE, "ServerError: list pods: 503: service unavailable"),
    (
        kube_errors.TransportError("get nodes: ClientOSError: reset"),
        "TransportError: get nodes: ClientOSError: reset",
    ),
    (
        kube_errors.KubeTimeoutError("list pods: timed out"),
        "KubeTimeoutError: list pods: timed out",
    ),
    (TimeoutError(), "TimeoutError"),
    (ConnectionResetError("reset by peer"), "ConnectionResetError: reset by peer"),
    (
        aws_error("RequestLimitExceeded", 503),
        "ClientError: An error occurred (RequestLimitExceeded) when calling the DescribeInstances operation: injected",
    ),
    (
        aws_error("InternalError", 500),
        "ClientError: An error occurred (InternalError) when calling the DescribeInstances operation: injected",
    ),
    (
        EndpointConnectionError(endpoint_url="http://ec2"),
        'EndpointConnectionError: Could not connect to the endpoint URL: "http://ec2"',
    ),
]
ERROR_CASES = [
    (RuntimeError("boom"), "RuntimeError: boom"),
    (KeyError("status"), "KeyError: 'status'"),
    (FORBIDDEN, "karpenter_py.kube.errors.ForbiddenError: get nodes: 403 Forbidden: no"),
    (
        aws_error("UnauthorizedOperation", 403),
        "botocore.exceptions.ClientError: An error occurred (UnauthorizedOperation) when calling the DescribeInstances operation: injected",
    ),
]


async def logged_failure(error: Exception, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    """The one line run_workers logs when reconciling "k" raises ``error`` (first failure: the
    retry comes ``base`` = 0.25 s later)."""
    reconciler, queue = Failing(error), new_queue(NAME, base=0.25, maximum=60.0)
    caplog.set_level(logging.WARNING, logger=runtime_log.name)
    queue.add("k")
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_workers(reconciler, queue, workers=1))
        await reconciler.failed.wait()
        await asyncio.sleep(0)
        queue.close()
    (record,) = [r for r in caplog.records if r.name == runtime_log.name]
    entry: dict[str, Any] = json.loads(JsonFormatter().format(record))
    del entry["time"]
    return entry


@pytest.mark.parametrize(("error", "text"), WARN_CASES, ids=[t for _, t in WARN_CASES])
async def test_a_transient_failure_is_one_warn_line_with_the_next_retry(
    error: Exception, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await logged_failure(error, caplog) == {
        "level": "WARN",
        "logger": "karpenter_py.controllers.runtime",
        "message": "reconcile failed",
        "controller": NAME,
        "key": "k",
        "retry_in_s": 0.25,
        "error": text,
    }


@pytest.mark.parametrize(("error", "last_line"), ERROR_CASES, ids=[t for _, t in ERROR_CASES])
async def test_any_other_failure_is_an_error_with_its_traceback(
    error: Exception, last_line: str, caplog: pytest.LogCaptureFixture
) -> None:
    entry = await logged_failure(error, caplog)
    traceback = entry.pop("error").splitlines()
    assert entry == {
        "level": "ERROR",
        "logger": "karpenter_py.controllers.runtime",
        "message": "reconcile failed",
        "controller": NAME,
        "key": "k",
        "retry_in_s": 0.25,
    }
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[-1] == last_line
