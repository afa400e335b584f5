"""Launcher: one CloudProvider.create per NodeClaim UID, error classification, the ICE cache."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from karpenter_py.kube.errors import TooManyRequestsError
from karpenter_py.launcher.launch import Launcher, LaunchStatus, UnavailableOfferings
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from karpenter_py.obs.metrics import Metrics
from tests import factories
from tests.unit.fakes import FakeCloudProvider


def claim(uid: str = "uid-1", *, pinned: bool = True) -> NodeClaim:
    reqs = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m"]}]
    if pinned:
        reqs += [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        ]
    return factories.nodeclaim(f"nc-{uid}", uid=uid, launched=False, requirements=reqs)


def fake_cloud(*errors: Exception) -> FakeCloudProvider:
    """A provider whose next creates fail with ``errors``, in order."""
    cloud = FakeCloudProvider()
    cloud.fail("create", *errors)
    return cloud


def launcher(cloud: FakeCloudProvider, clock: FakeClock | None = None, **kw: Any) -> Launcher:
    return Launcher(cloud, clock=clock or FakeClock(), **kw)


async def test_create_is_called_once_per_uid() -> None:
    cloud = fake_cloud()
    lc = launcher(cloud)
    first = await lc.launch(claim("a"))
    again = await lc.launch(claim("a"))  # a reconcile on a stale cached copy
    assert first.status is again.status is LaunchStatus.LAUNCHED
    assert again.nodeclaim is not None
    assert again.nodeclaim.status.provider_id == "fake://nc-a"
    assert len(cloud.create_calls) == 1
    await lc.launch(claim("b"))
    assert len(cloud.create_calls) == 2
    lc.forget("a")  # the NodeClaim was deleted
    await lc.launch(claim("a"))
    assert len(cloud.create_calls) == 3


async def test_uid_is_required() -> None:
    with pytest.raises(ValueError, match="uid"):
        await launcher(fake_cloud()).launch(claim(""))


async def test_insufficient_capacity_deletes_and_marks_offerings() -> None:
    clock = FakeClock()
    named = InsufficientCapacityError("no", offerings=(("m", "z2", "on-demand"),))
    lc = launcher(fake_cloud(named, InsufficientCapacityError("none named")), clock)
    out = await lc.launch(claim("a"))
    assert (out.status, out.reason, out.event_reason) == (
        LaunchStatus.DELETE,
        "insufficient_capacity",
        "InsufficientCapacityError",
    )
    assert lc.unavailable.is_unavailable("m", "z2", "on-demand")
    # No offerings named: the ones the NodeClaim pinned are marked.
    await lc.launch(claim("b"))
    assert lc.unavailable.is_unavailable("m", "z1", "spot")
    assert lc.result("a") is None  # nothing launched, nothing remembered


async def test_nodeclass_not_ready_deletes() -> None:
    out = await launcher(fake_cloud(NodeClassNotReadyError("nc"))).launch(claim())
    assert (out.status, out.reason, out.event_reason) == (
        LaunchStatus.DELETE,
        "nodeclass_not_ready",
        "NodeClassNotReady",
    )


async def test_other_errors_retry_with_backoff_then_succeed() -> None:
    metrics = Metrics()
    cloud = fake_cloud(CreateError("quota", reason="QuotaExceeded"), RuntimeError("boom"))
    lc = launcher(cloud, metrics=metrics, retry_base=1.0, retry_max=60.0)
    first = await lc.launch(claim())
    assert (first.status, first.reason, first.retry_after) == (
        LaunchStatus.RETRY,
        "QuotaExceeded",
        1.0,
    )
    second = await lc.launch(claim())
    assert (second.status, second.reason, second.retry_after) == (
        LaunchStatus.RETRY,
        "LaunchFailed",
        2.0,
    )
    third = await lc.launch(claim())
    assert third.status is LaunchStatus.LAUNCHED
    assert len(cloud.create_calls) == 3
    rendered = metrics.render()[0].decode()
    assert (
        'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",error="CreateError",method="Create",provider="fake"} 1.0'
        in rendered
    )


@pytest.mark.parametrize(
    ("error", "level", "traceback"),
    [
        # The kwok provider creates Nodes through the apiserver: a 429 there is transient.
        (TooManyRequestsError(status=429, verb="create", resource="nodes"), "WARNING", False),
        (TimeoutError(), "WARNING", False),
        (RuntimeError("provider bug"), "ERROR", True),
    ],
)
async def test_a_failed_create_is_logged_by_its_kind(
    error: Exception, level: str, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = await launcher(fake_cloud(error)).launch(claim())

    assert outcome.status is LaunchStatus.RETRY
    logged = [r for r in caplog.records if r.getMessage() == "launch failed"]
    assert [(r.levelname, r.exc_info is not None) for r in logged] == [(level, traceback)]


def types() -> list[InstanceType]:
    offers = (
        Offering("z1", "spot", 1.0),
        Offering("z1", "on-demand", 2.0),
        Offering("z2", "spot", 1.0),
    )
    return [
        make_instance_type(name="m", requirements={}, capacity={"cpu": 1000}, offerings=offers),
        make_instance_type(name="c", requirements={}, capacity={"cpu": 1000}, offerings=offers),
    ]


def test_ice_cache_ttl_and_apply() -> None:
    clock = FakeClock()
    ice = UnavailableOfferings(clock=clock, ttl=180)
    original = types()
    assert ice.apply(original) == original  # nothing cached: same objects
    seq = ice.seq_num
    ice.mark_unavailable("m", "z1", "spot")
    assert ice.seq_num > seq
    masked = {it.name: it for it in ice.apply(original)}
    assert [(o.zone, o.capacity_type, o.available) for o in masked["m"].offerings] == [
        ("z1", "spot", False),
        ("z1", "on-demand", True),
        ("z2", "spot", True),
    ]
    assert masked["c"] is original[1]  # untouched types are not copied
    assert all(o.available for o in original[0].offerings)  # inputs are not mutated
    clock.step(100)
    ice.mark_unavailable("m", "z1", "spot")  # re-marking extends the TTL
    clock.step(100)
    assert ice.is_unavailable("m", "z1", "spot")
    assert ice.entries() == {("m", "z1", "spot"): pytest.approx(80)}
    clock.step(81)
    assert not ice.is_unavailable("m", "z1", "spot")
    assert ice.entries() == {}
