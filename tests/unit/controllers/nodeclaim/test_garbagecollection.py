"""Garbage collection both ways: NodeClaims whose instance vanished, instances nobody claims."""

from __future__ import annotations

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.kube.errors import ServerError
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, wire


def claim(name: str, *, pid: str = "", registered: bool = True) -> NodeClaim:
    conditions = [factories.condition("Registered")] if registered else []
    return factories.nodeclaim(name, uid=f"uid-{name}", provider_id=pid, conditions=conditions)


def node(name: str, *, ready: bool) -> Node:
    return factories.node(name, provider_id=f"fake://{name}", ready=ready)


def collector(
    cluster: Cluster,
    cloud: FakeCloudProvider,
    client: FakeKube,
    clock: FakeClock,
    metrics: Metrics | None = None,
) -> NodeClaimGarbageCollector:
    recorder = EventRecorder(client, clock=clock)
    return NodeClaimGarbageCollector(
        deps(
            client=client,
            cluster=cluster,
            cloud=cloud,
            recorder=recorder,
            clock=clock,
            metrics=metrics,
        ),
        orphan_grace=30,
        retry_base=1.0,
        jitter=0.0,  # exact retry times
    )


def world(*instances: str) -> tuple[Cluster, FakeCloudProvider, FakeKube, FakeClock]:
    cloud = FakeCloudProvider()
    cloud.launched(*instances)
    return Cluster(), cloud, FakeKube(), FakeClock()


def add(cluster: Cluster, client: FakeKube, nc: NodeClaim) -> None:
    cluster.upsert_nodeclaim(nc)
    client.put(NODECLAIMS, wire(nc))


async def test_nodeclaims_whose_instance_vanished_are_deleted() -> None:
    cluster, cloud, client, clock = world("alive")
    for nc in (
        claim("alive", pid="fake://alive"),
        claim("vanished", pid="fake://vanished"),
        claim("vanished-but-ready", pid="fake://vanished-but-ready"),
        claim("launching", pid="fake://launching", registered=False),  # liveness owns it
        claim("no-pid"),
    ):
        add(cluster, client, nc)
    cluster.upsert_node(node("vanished", ready=False))
    cluster.upsert_node(node("vanished-but-ready", ready=True))
    result = await collector(cluster, cloud, client, clock).collect()
    assert result.nodeclaims_deleted == ["vanished"]
    deleted = [(c.name, c.uid) for c in client.calls_of("delete", NODECLAIMS)]
    assert deleted == [("vanished", "uid-vanished")]


async def test_unclaimed_instances_are_terminated_after_the_grace() -> None:
    cluster, cloud, client, clock = world("claimed", "orphan", "mid-launch")
    add(cluster, client, claim("claimed", pid="fake://claimed"))
    add(cluster, client, claim("mid-launch", registered=False))  # status not written yet
    gc = collector(cluster, cloud, client, clock)
    assert (await gc.collect()).instances_deleted == []  # first sighting starts the clock
    clock.step(29)
    assert (await gc.collect()).instances_deleted == []
    clock.step(2)
    assert (await gc.collect()).instances_deleted == ["fake://orphan"]
    assert cloud.deleted == ["fake://orphan"]
    assert set(cloud.instances) == {"fake://claimed", "fake://mid-launch"}


def delete_errors(metrics: Metrics, error: str) -> float | None:
    return metrics.registry.get_sample_value(
        "karpenter_cloudprovider_errors_total",
        {
            "controller": "nodeclaim.garbagecollection",
            "method": "Delete",
            "provider": "fake",
            "error": error,
        },
    )


async def test_one_failing_terminate_neither_stops_the_others_nor_is_retried_before_its_backoff() -> (
    None
):
    cluster, cloud, client, clock = world("a", "b", "c")
    metrics = Metrics()
    gc = collector(cluster, cloud, client, clock, metrics)
    await gc.collect()  # first sighting starts the grace
    clock.step(30)
    cloud.fail("delete", RuntimeError("RequestLimitExceeded"))  # the first call: a's
    result = await gc.collect()
    assert (result.instances_deleted, result.failed) == (["fake://b", "fake://c"], ["fake://a"])
    assert cloud.deleted == ["fake://b", "fake://c"]
    assert delete_errors(metrics, "RuntimeError") == 1.0
    assert gc.next_pass_in() == 1.0  # the loop comes back for a's retry, not in 2 minutes

    clock.step(0.5)  # a's retry is not due: the pass leaves it alone
    result = await gc.collect()
    assert (result.instances_deleted, result.backing_off) == ([], ["fake://a"])
    assert [c.name for c in cloud.delete_calls] == ["a", "b", "c"]

    clock.step(0.5)  # due: fails again, and waits twice as long
    cloud.fail("delete", RuntimeError("RequestLimitExceeded"))
    result = await gc.collect()
    assert (result.instances_deleted, result.failed) == ([], ["fake://a"])
    assert delete_errors(metrics, "RuntimeError") == 2.0
    assert gc.next_pass_in() == 2.0

    clock.step(2)
    result = await gc.collect()
    assert (result.instances_deleted, result.failed) == (["fake://a"], [])
    assert cloud.deleted == ["fake://b", "fake://c", "fake://a"]
    assert gc.next_pass_in() == 120.0  # nothing left to retry


async def test_a_failing_nodeclaim_delete_does_not_stop_the_orphans() -> None:
    cluster, cloud, client, clock = world("orphan")
    gc = collector(cluster, cloud, client, clock)
    await gc.collect()
    clock.step(30)
    add(cluster, client, claim("vanished", pid="fake://vanished"))
    client.fail("delete", "vanished", ServerError(status=500, verb="delete", name="vanished"))
    result = await gc.collect()
    assert (result.nodeclaims_deleted, result.instances_deleted) == ([], ["fake://orphan"])
    assert result.failed == ["vanished"]
    clock.step(1)
    result = await gc.collect()
    assert (result.nodeclaims_deleted, result.failed) == (["vanished"], [])
