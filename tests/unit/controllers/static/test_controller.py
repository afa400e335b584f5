"""``static.capacity`` against in-memory fakes: the NodeClaims it writes and deletes per pool."""

from __future__ import annotations

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.runtime import Result
from karpenter_py.controllers.static.controller import StaticCapacity
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, node, node_labels, nodeclaim, nodepool, pod
from tests.unit.fakes import FakeKube, FakeNodeAPI, FakeWriter, deps

C4 = "c-4x-amd64-linux"
ODA = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C4]}]


def controller(cluster: Cluster, client: FakeKube, writer: FakeWriter) -> StaticCapacity:
    clock = FakeClock()
    rounds = RoundRunner(
        cluster=cluster,
        writer=writer,
        cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
        clock=clock,
    )
    return StaticCapacity(deps(client=client, cluster=cluster, clock=clock), rounds)


def cluster_with(replicas: int, members: list[str], *, limit: str | None = None) -> Cluster:
    c = Cluster()
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    c.upsert_nodepool(
        nodepool(
            "static",
            requirements=ODA,
            replicas=replicas,
            limits={"nodes": limit} if limit is not None else None,
        )
    )
    c.upsert_nodepool(nodepool("dynamic"))
    for name in members:
        c.upsert_node(node(name, labels=node_labels("static", C4)))
        c.upsert_nodeclaim(nodeclaim(name, pool="static"))
    return c


async def test_a_static_pool_is_filled_to_its_replicas_with_no_pod() -> None:
    c, client, writer = cluster_with(3, ["a"]), FakeKube(), FakeWriter()
    result = await controller(c, client, writer).reconcile("static")
    assert result == Result(requeue_after=60.0)
    assert [
        (w["metadata"]["generateName"], w["metadata"]["labels"]["karpenter.sh/nodepool"])
        for w in writer.created
    ] == [("static-", "static"), ("static-", "static")]
    # In the state at once: the next reconcile launches nothing more.
    assert sorted(c.nodeclaims) == ["a", "static-00000", "static-00001"]
    await controller(c, client, FakeWriter()).reconcile("static")
    assert len(writer.created) == 2


async def test_launches_stop_at_limits_nodes_and_look_again_in_30s() -> None:
    c, client, writer = cluster_with(4, [], limit="2"), FakeKube(), FakeWriter()
    result = await controller(c, client, writer).reconcile("static")
    assert (result, len(writer.created)) == (Result(requeue_after=30.0), 2)


async def test_scale_down_deletes_the_empty_node_first() -> None:
    c, client, writer = cluster_with(1, ["a", "b"]), FakeKube(), FakeWriter()
    c.upsert_pod(pod("busy", node_name="a"))
    await controller(c, client, writer).reconcile("static")
    assert [(call.name, call.uid) for call in client.calls_of("delete", NODECLAIMS)] == [
        ("b", "nc-uid-b")
    ]
    marked = {sn.name for sn in c.snapshot(FakeClock().now()).nodes if sn.marked_for_deletion}
    assert (writer.created, marked) == ([], {"b"})


async def test_dynamic_and_unknown_pools_are_left_alone() -> None:
    c, client, writer = cluster_with(1, []), FakeKube(), FakeWriter()
    assert await controller(c, client, writer).reconcile("dynamic") is None
    assert await controller(c, client, writer).reconcile("gone") is None
    assert (writer.created, client.calls) == ([], [])
