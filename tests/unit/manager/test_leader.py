"""Leader election against an in-memory Lease API with optimistic concurrency, on a fake clock.

The real-apiserver counterpart is tests/cluster/test_leader.py.
"""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.kube import (
    LEASES,
    AlreadyExistsError,
    ConflictError,
    KubeObject,
    NotFoundError,
    Resource,
    ServerError,
)
from karpenter_py.manager.leader import (
    LeaderElector,
    Leadership,
    LeadershipLost,
    LeaseRecord,
    default_identity,
)

NS, NAME = "karpenter", "karpenter-leader-election"


class FakeLeaseAPI:
    """get/create/update for Leases with resourceVersion preconditions, like the apiserver."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], KubeObject] = {}
        self.rv = 0
        self.down: set[str] = set()  # identities whose requests fail (network partition)
        self.calls: list[str] = []

    def _check(self, body: KubeObject | None, verb: str) -> None:
        holder = (body or {}).get("spec", {}).get("holderIdentity", "")
        self.calls.append(verb)
        if "*" in self.down or (holder and holder in self.down):
            raise ServerError(status=503, reason="ServiceUnavailable", verb=verb)

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> KubeObject:
        await asyncio.sleep(0)
        self._check(None, "get")
        try:
            return copy.deepcopy(self.objects[(namespace or "", name)])
        except KeyError:
            raise NotFoundError(status=404, reason="NotFound", verb="get") from None

    async def create(
        self, resource: Resource, body: KubeObject, *, namespace: str | None = None
    ) -> KubeObject:
        await asyncio.sleep(0)
        self._check(body, "create")
        key = (namespace or "", body["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExistsError(status=409, reason="AlreadyExists", verb="create")
        return self._store(key, body)

    async def update(
        self, resource: Resource, body: KubeObject, *, namespace: str | None = None
    ) -> KubeObject:
        await asyncio.sleep(0)
        self._check(body, "update")
        key = (namespace or "", body["metadata"]["name"])
        current = self.objects.get(key)
        if current is None:
            raise NotFoundError(status=404, reason="NotFound", verb="update")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ConflictError(status=409, reason="Conflict", verb="update")
        return self._store(key, body)

    def _store(self, key: tuple[str, str], body: KubeObject) -> KubeObject:
        self.rv += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.objects[(NS, NAME)]["spec"]
        return spec

    def touch(self, **spec: Any) -> None:
        """Another writer changes the Lease (bumps resourceVersion)."""
        obj = copy.deepcopy(self.objects[(NS, NAME)])
        obj["spec"].update(spec)
        obj["metadata"].setdefault("annotations", {})["touched"] = str(self.rv)
        self._store((NS, NAME), obj)


async def advance(clock: FakeClock, seconds: float, step: float = 0.05) -> None:
    for _ in range(round(seconds / step)):
        clock.step(step)
        for _ in range(10):
            await asyncio.sleep(0)


def leads(e: LeaderElector) -> bool:
    return e.is_leader


def elector(api: FakeLeaseAPI, clock: FakeClock, identity: str, **kw: Any) -> LeaderElector:
    kw.setdefault("lease_duration", 15.0)
    kw.setdefault("renew_deadline", 10.0)
    kw.setdefault("retry_period", 2.0)
    return LeaderElector(
        api, name=NAME, namespace=NS, identity=identity, clock=clock, rng=random.Random(1), **kw
    )


async def test_first_candidate_creates_the_lease_and_leads():
    api, clock = FakeLeaseAPI(), FakeClock()
    changes: list[bool] = []
    a = elector(api, clock, "a", on_change=changes.append)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(a.run())
        await advance(clock, 0.1)
        assert a.is_leader
        assert changes == [True]
        spec = api.spec()
        assert spec["holderIdentity"] == "a"
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert spec["acquireTime"] == spec["renewTime"]
        assert spec["renewTime"].endswith("Z")
        first_renew = spec["renewTime"]
        await advance(clock, 4.1)
        assert api.spec()["renewTime"] != first_renew  # renewed
        assert api.spec()["acquireTime"] == spec["acquireTime"]  # kept while leading
        task.cancel()
    assert changes == [True, False]
    assert a.leadership.lost


async def test_only_one_of_two_leads_while_the_leader_renews():
    api, clock = FakeLeaseAPI(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await advance(clock, 0.1)
        tb = tg.create_task(b.run())
        for _ in range(12):  # a minute: several lease durations
            await advance(clock, 5)
            assert a.is_leader
            assert not b.is_leader
            assert api.spec()["holderIdentity"] == "a"
        renews = api.calls.count("update")
        assert renews >= 25  # one renewal per retry period
        ta.cancel()
        tb.cancel()


async def test_cancelled_leader_releases_and_standby_takes_over_quickly():
    api, clock = FakeLeaseAPI(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await advance(clock, 0.1)
        tb = tg.create_task(b.run())
        await advance(clock, 3)
        ta.cancel()
        await advance(clock, 0.1)
        assert "holderIdentity" not in api.spec()  # released: empty holder
        assert api.spec()["leaseDurationSeconds"] == 1
        assert a.leadership.lost
        # b retries every retry_period * (1 + 1.2 * jitter) <= 4.4s; no need to wait 15s
        await advance(clock, 4.5)
        assert b.is_leader
        assert api.spec()["holderIdentity"] == "b"
        assert api.spec()["leaseTransitions"] == 1
        tb.cancel()


async def test_crashed_leader_is_replaced_only_after_the_lease_expires():
    api, clock = FakeLeaseAPI(), FakeClock()
    a = elector(api, clock, "a", release_on_cancel=False)
    b = elector(api, clock, "b")
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await advance(clock, 0.1)
        tb = tg.create_task(b.run())
        await advance(clock, 3)
        ta.cancel()  # dies without releasing: holder stays "a"
        await advance(clock, 0.1)
        assert api.spec()["holderIdentity"] == "a"
        await advance(clock, 10)  # < lease duration since b last saw the record change
        assert not b.is_leader
        await advance(clock, 15 + 4.5 - 10)
        assert leads(b)  # (a call: mypy must not carry the narrowing above over)
        assert api.spec()["holderIdentity"] == "b"
        tb.cancel()


async def test_leader_that_cannot_renew_steps_down_after_the_renew_deadline():
    api, clock = FakeLeaseAPI(), FakeClock()
    changes: list[bool] = []
    a = elector(api, clock, "a", on_change=changes.append)
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 -- the TaskGroup is the subject
        async with asyncio.TaskGroup() as tg:
            tg.create_task(a.run())
            await advance(clock, 0.1)
            assert a.is_leader
            api.down.add("*")  # apiserver unreachable
            await advance(clock, 2 + 9)  # first failed renewal at t=2, deadline at t=12
            assert a.is_leader
            await advance(clock, 1.5)  # run() raises here and the group stops
            pytest.fail("leadership should have been lost by now")
    assert info.group_contains(LeadershipLost)
    assert 11.1 < clock.monotonic() < 12.7
    assert a.leadership.lost
    assert changes == [True, False]
    with pytest.raises(LeadershipLost):
        await a.leadership.wait_for_leadership()


async def test_a_foreign_write_is_absorbed_by_re_reading():
    api, clock = FakeLeaseAPI(), FakeClock()
    a = elector(api, clock, "a")
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(a.run())
        await advance(clock, 0.1)
        api.touch()  # e.g. someone annotated the Lease: resourceVersion moves on
        await advance(clock, 2.1)  # renewal: 409 on the cached object, GET, retry -> ok
        assert a.is_leader
        assert api.spec()["holderIdentity"] == "a"
        assert "touched" in api.objects[(NS, NAME)]["metadata"]["annotations"]
        task.cancel()


async def test_a_stolen_lease_means_leadership_is_lost():
    api, clock = FakeLeaseAPI(), FakeClock()
    a = elector(api, clock, "a")
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 -- the group is the subject
        async with asyncio.TaskGroup() as tg:
            tg.create_task(a.run())
            await advance(clock, 0.1)
            api.touch(holderIdentity="intruder", leaseDurationSeconds=3600)
            await advance(clock, 13)
    assert info.group_contains(LeadershipLost)
    assert api.spec()["holderIdentity"] == "intruder"


async def test_waiters_and_unconditional_leadership():
    leadership = Leadership.unconditional()
    assert leadership.is_leader
    await leadership.wait_for_leadership()  # returns at once

    api, clock = FakeLeaseAPI(), FakeClock()
    api.objects[(NS, NAME)] = {
        "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "1"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 15},
    }
    b = elector(api, clock, "b")

    async def outcome() -> str:
        try:
            await b.leadership.wait_for_leadership()
        except LeadershipLost:
            return "lost"
        return "leading"

    async with asyncio.TaskGroup() as tg:
        run = tg.create_task(b.run())
        waiter = tg.create_task(outcome())
        await advance(clock, 1)
        assert not waiter.done()  # "other" holds a fresh lease
        run.cancel()  # the elector stops before ever leading
        await advance(clock, 0.1)
        assert waiter.done()
        assert waiter.result() == "lost"
    assert "holderIdentity" in api.spec()
    assert api.spec()["holderIdentity"] == "other"  # never released what it never held


def test_lease_record_round_trip():
    record = LeaseRecord("me", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z", 3)
    lease = {"spec": record.to_spec()}
    assert LeaseRecord.from_lease(lease) == record
    assert "holderIdentity" not in LeaseRecord("", 1).to_spec()


@pytest.mark.parametrize(
    "kw",
    [
        {"lease_duration": 10, "renew_deadline": 10, "retry_period": 2},
        {"lease_duration": 15, "renew_deadline": 2, "retry_period": 2},
        {"lease_duration": 0.5, "renew_deadline": 0.3, "retry_period": 0.1},
        {"lease_duration": 15, "renew_deadline": 10, "retry_period": 0},
    ],
)
def test_duration_validation(kw):
    with pytest.raises(ValueError):
        LeaderElector(FakeLeaseAPI(), name=NAME, namespace=NS, identity="a", **kw)


def test_default_identity_is_unique():
    assert default_identity() != default_identity()
    assert "_" in default_identity()


def test_leases_resource():
    assert LEASES.path(namespace=NS, name=NAME) == (
        "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases/karpenter-leader-election"
    )
