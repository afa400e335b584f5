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
from tests import factories
from tests.unit.fakes import FakeKube


def fake_api(answers: dict[str, list[Exception]]) -> FakeKube:
    """An API whose next evictions of each pod fail with its errors, in order; then succeed."""
    api = FakeKube()
    for name, errors in answers.items():
        api.fail("evict", name, *errors)
    return api


def evictions(api: FakeKube) -> list[tuple[str, str | None]]:
    """(pod, uid precondition) of every eviction requested."""
    return [(c.name, c.uid) for c in api.calls_of("evict")]


def err(cls: type[ApiError], status: int) -> ApiError:
    return cls(status=status)


def pod(name: str) -> Pod:
    return factories.pod(name, namespace="ns", uid=f"uid-{name}")


def queue(api: FakeKube, metrics: Metrics | None = None) -> tuple[EvictionQueue, EventRecorder]:
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
    api = fake_api(
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
    assert evictions(api)[0] == ("ok", "u")  # UID precondition sent


async def test_pdb_refusals_retry_until_allowed_and_queue_dedupes() -> None:
    metrics = Metrics()
    refusals: list[Exception] = [err(TooManyRequestsError, 429)] * 3
    api = fake_api({"guarded": refusals})
    q, recorder = queue(api, metrics)
    assert q.add("node-1", [pod("guarded"), pod("free")]) == 2
    assert q.add("node-1", [pod("guarded")]) == 0  # already queued or backing off
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(q.run())
        await drained(q)
        task.cancel()
    assert [n for n, _ in evictions(api)].count("guarded") == 4
    assert pod("guarded") not in q
    await recorder.flush()
    failed = [e for e in api.events if e["reason"] == "FailedDraining"]
    assert len(failed) == 1  # de-duplicated: same node, reason and message
    text = metrics.render()[0].decode()
    assert 'karpenter_pods_eviction_requests_total{code="429"} 3.0' in text
    assert 'karpenter_pods_eviction_requests_total{code="200"} 2.0' in text


async def test_a_bug_in_one_attempt_does_not_kill_the_queue() -> None:
    api = fake_api({"bad": [RuntimeError("bug")]})
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
    api = fake_api({})
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
    assert evictions(api) == [("web", "uid-web"), ("web", "uid-web")]
