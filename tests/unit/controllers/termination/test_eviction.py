"""The eviction queue: answers of the Eviction API, PDB retries with backoff, de-duplication."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.termination.eviction import EvictionKey, EvictionQueue
from karpenter_py.controllers.termination.nodeclaim import termination_deadline
from karpenter_py.kube.errors import (
    ApiError,
    ConflictError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from karpenter_py.kube.events import EventRecorder
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Pod
from karpenter_py.obs.metrics import Metrics


class FakeAPI:
    def __init__(self, answers: dict[str, list[Exception | None]]) -> None:
        self.answers = answers
        self.evictions: list[tuple[str, str | None]] = []
        self.events: list[dict[str, Any]] = []

    async def evict(self, name: str, *, namespace: str, uid: str | None = None, **_: Any) -> None:
        self.evictions.append((name, uid))
        queue = self.answers.get(name) or [None]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if answer is not None:
            raise answer

    async def create_event(
        self, event: dict[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        self.events.append(event)
        return event


def err(cls: type[ApiError], status: int) -> ApiError:
    return cls(status=status)


def pod(name: str) -> Pod:
    return Pod(namespace="ns", name=name, uid=f"uid-{name}")


def queue(api: FakeAPI, metrics: Metrics | None = None) -> tuple[EvictionQueue, EventRecorder]:
    recorder = EventRecorder(api, clock=FakeClock())
    return EvictionQueue(
        api, recorder, metrics=metrics, base=0.01, maximum=0.05, workers=2
    ), recorder


async def drained(q: EvictionQueue, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if not len(q):
                return
            await asyncio.sleep(0.01)


async def test_answers_are_classified() -> None:
    api = FakeAPI(
        {
            "gone": [err(NotFoundError, 404)],
            "replaced": [err(ConflictError, 409)],
            "pdb": [err(TooManyRequestsError, 429)],
            "multi": [err(ServerError, 500)],
        }
    )
    q, recorder = queue(api)
    assert await q.evict(EvictionKey("ns", "ok", "u")) is True
    assert await q.evict(EvictionKey("ns", "gone", "u")) is True
    assert await q.evict(EvictionKey("ns", "replaced", "u")) is True
    q.add("node-1", [pod("pdb")])
    assert await q.evict(EvictionKey.of(pod("pdb"))) is False
    assert await q.evict(EvictionKey("ns", "multi", "u")) is False
    await recorder.flush()
    reasons = [(e["reason"], e["involvedObject"]["kind"]) for e in api.events]
    assert ("Evicted", "Pod") in reasons
    assert ("FailedDraining", "Node") in reasons  # the PDB refusal, reported on the node
    assert api.evictions[0] == ("ok", "u")  # UID precondition sent


async def test_pdb_refusals_retry_until_allowed_and_queue_dedupes() -> None:
    metrics = Metrics()
    refusals: list[Exception | None] = [err(TooManyRequestsError, 429)] * 3 + [None]
    api = FakeAPI({"guarded": refusals})
    q, recorder = queue(api, metrics)
    assert q.add("node-1", [pod("guarded"), pod("free")]) == 2
    assert q.add("node-1", [pod("guarded")]) == 0  # already queued or backing off
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(q.run())
        await drained(q)
        task.cancel()
    assert [n for n, _ in api.evictions].count("guarded") == 4
    assert pod("guarded") not in q
    await recorder.flush()
    failed = [e for e in api.events if e["reason"] == "FailedDraining"]
    assert len(failed) == 1  # de-duplicated: same node, reason and message
    text = metrics.render()[0].decode()
    assert 'karpenter_pods_eviction_requests_total{code="429"} 3.0' in text
    assert 'karpenter_pods_eviction_requests_total{code="200"} 2.0' in text


async def test_a_bug_in_one_attempt_does_not_kill_the_queue() -> None:
    api = FakeAPI({"bad": [RuntimeError("bug"), None]})
    q, _ = queue(api)
    q.add("n", [pod("bad")])
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(q.run())
        await drained(q)
        task.cancel()
    assert len(q) == 0


def test_termination_deadline() -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "nc", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
            "requirements": [],
            "terminationGracePeriod": "1h30m",
        },
    }
    assert termination_deadline(NodeClaim.model_validate(body)) == datetime(
        2026, 1, 1, 1, 30, tzinfo=UTC
    )
    body["spec"].pop("terminationGracePeriod")
    assert termination_deadline(NodeClaim.model_validate(body)) is None


async def test_a_pod_just_evicted_is_not_evicted_again_while_the_cache_lags() -> None:
    now = [100.0]
    api = FakeAPI({})
    recorder = EventRecorder(api, clock=FakeClock())
    q = EvictionQueue(api, recorder, base=0.01, maximum=0.05, workers=1, monotonic=lambda: now[0])
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(q.run())
        assert q.add("node-1", [pod("web")]) == 1
        await drained(q)
        # The next drain pass still sees the pod running (no deletionTimestamp yet).
        assert q.add("node-1", [pod("web")]) == 0
        now[0] += 31.0  # long after: the pod really is still there, so try again
        assert q.add("node-1", [pod("web")]) == 1
        await drained(q)
        task.cancel()
    assert api.evictions == [("web", "uid-web"), ("web", "uid-web")]
