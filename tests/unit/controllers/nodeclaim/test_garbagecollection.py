"""Garbage collection both ways: NodeClaims whose instance vanished, instances nobody claims."""

from __future__ import annotations

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, wire


def claim(name: str, *, pid: str = "", registered: bool = True) -> NodeClaim:
    conditions = [factories.condition("Registered")] if registered else []
    return factories.nodeclaim(name, uid=f"uid-{name}", provider_id=pid, conditions=conditions)


def node(name: str, *, ready: bool) -> Node:
    return factories.node(name, provider_id=f"fake://{name}", ready=ready)


def collector(
    cluster: Cluster, cloud: FakeCloudProvider, client: FakeKube, clock: FakeClock
) -> NodeClaimGarbageCollector:
    recorder = EventRecorder(client, clock=clock)
    return NodeClaimGarbageCollector(
        deps(client=client, cluster=cluster, cloud=cloud, recorder=recorder, clock=clock),
        orphan_grace=30,
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
