"""Provisioner rounds against in-memory fakes: what NodeClaims it writes, and when it does not."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.kube import errors as kube_errors
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Pod
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.unit.fakes import FakeNodeAPI, FakeWriter


def nodepool(**spec: Any) -> NodePool:
    return factories.nodepool(
        uid="np-uid",
        labels={"team": "a"},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ],
        taints=[{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
        **spec,
    )


def pending(name: str, cpu: str = "1") -> Pod:
    return factories.pod(
        name,
        uid=f"uid-{name}",
        cpu=cpu,
        owner=None,
        pending=True,
        tolerations=[{"key": "dedicated", "operator": "Exists"}],
    )


def provisioner(cluster: Cluster, writer: FakeWriter) -> Provisioner:
    return Provisioner(
        RoundRunner(
            cluster=cluster,
            writer=writer,
            cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
            clock=FakeClock(),
        ),
        Batcher(idle=0.01, max_window=0.05),
    )


def synced_cluster(np: NodePool, pods: int, cpu: str = "1", *, ready: bool = True) -> Cluster:
    cluster = Cluster()
    cluster.upsert_nodepool(np)
    for i in range(pods):
        cluster.upsert_pod(pending(f"p{i}", cpu))
    cluster.upsert_nodeclass(("karpenter.kwok.sh", "KWOKNodeClass", "default"), ready)
    for kind in KINDS:
        cluster.mark_synced(kind)
    return cluster


async def test_writes_nodeclaims_as_upstream_shapes_them() -> None:
    cluster, writer = synced_cluster(nodepool(), 4), FakeWriter()
    result = await provisioner(cluster, writer).provision()
    assert result.pods == 4
    assert len(writer.created) == len(result.created) >= 1
    body = writer.created[0]
    meta, spec = body["metadata"], body["spec"]
    assert meta["generateName"] == "default-"
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["ownerReferences"][0] | {} == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "default",
        "uid": "np-uid",
        "blockOwnerDeletion": True,
    }
    assert meta["labels"]["karpenter.sh/nodepool"] == "default"
    assert meta["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    assert meta["labels"]["team"] == "a"
    assert meta["labels"]["karpenter.kwok.sh/kwoknodeclass"] == "default"
    assert meta["annotations"]["karpenter.sh/nodepool-hash-version"] == "v3"
    assert spec["taints"] == [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
    assert spec["nodeClassRef"] == {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "default",
    }
    assert spec["expireAfter"] == "720h"
    keys = {r["key"]: r for r in spec["requirements"]}
    assert keys["node.kubernetes.io/instance-type"]["operator"] == "In"
    assert "kubernetes.io/hostname" not in keys
    assert spec["resources"]["requests"]["cpu"] in ("4", "4000m")


async def test_second_round_uses_in_flight_claims_instead_of_launching_again() -> None:
    cluster, writer = synced_cluster(nodepool(), 6), FakeWriter()
    p = provisioner(cluster, writer)
    first = await p.provision()
    again = await p.provision()
    assert len(first.created) >= 1
    assert again.created == ()
    assert again.placed_on_existing == 6
    assert len(writer.created) == len(first.created)


@pytest.mark.parametrize(("limit", "pods", "expected_claims"), [("4", 8, 1), ("2000", 8, None)])
async def test_limits_hold_across_rounds(
    limit: str, pods: int, expected_claims: int | None
) -> None:
    # 3-cpu pods cannot share a 4-cpu node; a cpu limit of 4 allows exactly one node in total.
    cluster, writer = synced_cluster(nodepool(limits={"cpu": limit}), pods, cpu="3"), FakeWriter()
    p = provisioner(cluster, writer)
    first = await p.provision()
    second = await p.provision()
    if expected_claims is None:
        assert first.errors == 0
        assert second.created == ()
    else:
        assert len(writer.created) == expected_claims
        assert second.created == ()
        assert second.errors > 0


@pytest.mark.parametrize("ready", [False, None])
async def test_no_launches_for_a_pool_whose_nodeclass_is_not_ready_or_missing(
    ready: bool | None,
) -> None:
    cluster, writer = synced_cluster(nodepool(), 3, ready=bool(ready)), FakeWriter()
    if ready is None:
        cluster.delete_nodeclass(("karpenter.kwok.sh", "KWOKNodeClass", "default"))
    result = await provisioner(cluster, writer).provision()
    assert writer.created == []
    assert result.errors == 3


async def test_nothing_pending_writes_nothing() -> None:
    cluster, writer = synced_cluster(nodepool(), 0), FakeWriter()
    result = await provisioner(cluster, writer).provision()
    assert (result.pods, result.created, writer.created) == (0, (), [])


def test_sync_gate_lists_what_is_missing() -> None:
    cluster = Cluster()
    assert not cluster.synced()
    for kind in KINDS[:-1]:
        cluster.mark_synced(kind)
    assert cluster.unsynced() == [KINDS[-1]]
    cluster.mark_synced(KINDS[-1])
    assert cluster.synced()


async def test_solver_annotations_reach_the_nodeclaim() -> None:
    """The solver's karpenter.sh/nodeclaim-min-values-relaxed decision is written as decided,
    next to the template's annotations and the pool's hash annotations."""
    np = nodepool()
    np.spec.template.metadata.annotations["owner"] = "team-a"
    cluster, writer = synced_cluster(np, 1), FakeWriter()
    await provisioner(cluster, writer).provision()
    (body,) = writer.created
    annotations = body["metadata"]["annotations"]
    assert annotations["karpenter.sh/nodeclaim-min-values-relaxed"] == "false"
    assert annotations["owner"] == "team-a"
    assert set(annotations) == {
        "owner",
        "karpenter.sh/nodeclaim-min-values-relaxed",
        "karpenter.sh/nodepool-hash",
        "karpenter.sh/nodepool-hash-version",
    }


async def test_instance_type_indexes_are_reused_across_rounds() -> None:
    np = nodepool()
    cluster, writer = synced_cluster(np, 1), FakeWriter()
    prov = provisioner(cluster, writer)
    await prov.provision()
    cluster.upsert_pod(pending("late"))
    await prov.provision()
    assert (prov.round.indexes.misses, prov.round.indexes.hits) == (1, 1)
    # The pool's template changes: its index is rebuilt.
    np2 = nodepool()
    np2.spec.template.metadata.labels["team"] = "b"
    cluster.upsert_nodepool(np2)
    cluster.upsert_pod(pending("later"))
    await prov.provision()
    assert (prov.round.indexes.misses, prov.round.indexes.hits) == (2, 1)


class RecordingEvents:
    def __init__(self) -> None:
        self.created: list[tuple[str, str, bool]] = []

    def pod_nominated(self, pod: Any, target: str) -> None:
        pass

    def pod_failed_scheduling(self, pod: Any, reason: str) -> None:
        pass

    def nodeclaim_created(self, nodepool: str, reason: str, min_values_relaxed: bool) -> None:
        self.created.append((nodepool, reason, min_values_relaxed))


async def test_created_nodeclaims_are_counted_with_their_reason() -> None:
    """Provisioning counts "provisioned"; disruption's replacements pass their own reason."""
    cluster, writer = synced_cluster(nodepool(), 1), FakeWriter()
    events = RecordingEvents()
    rounds = RoundRunner(
        cluster=cluster,
        writer=writer,
        cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
        clock=FakeClock(),
        events=events,
    )
    prov = Provisioner(rounds, Batcher(idle=0.01, max_window=0.05))
    await prov.provision()
    cluster.upsert_pod(pending("again"))
    snap = cluster.snapshot(rounds.clock.now())
    inp = solve_input(
        snap, instance_types=await rounds.instance_types(snap), options=SolveOptions()
    )
    plan = await rounds.solve(inp, snap)
    await rounds.create(plan.new_node_claims, snap.nodepools, reason="underutilized")
    assert events.created == [
        ("default", "provisioned", False),
        ("default", "underutilized", False),
    ]


@pytest.mark.parametrize(
    ("error", "level", "traceback"),
    [
        (
            kube_errors.TooManyRequestsError(status=429, verb="create", resource="nodeclaims"),
            "WARNING",
            False,
        ),
        (
            kube_errors.ServerError(status=503, verb="create", resource="nodeclaims"),
            "WARNING",
            False,
        ),
        (RuntimeError("boom"), "ERROR", True),
    ],
)
async def test_a_failed_round_is_logged_by_kind_and_retried(
    error: Exception, level: str, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    p = provisioner(synced_cluster(nodepool(), 1), FakeWriter())
    rounds: list[int] = []
    retried = asyncio.Event()

    async def provision() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 2:
            retried.set()
        raise error

    p.provision = provision  # type: ignore[method-assign,assignment]
    caplog.set_level(logging.WARNING, logger="karpenter.provisioner")
    p.batcher.trigger("p0")
    async with asyncio.TaskGroup() as tg:
        running = tg.create_task(p.run())
        await retried.wait()
        running.cancel()
    first = caplog.records[0]
    assert (first.levelname, first.getMessage(), first.exc_info is not None) == (
        level,
        "provisioning round failed; retrying with the next batch",
        traceback,
    )


async def test_a_round_records_where_it_planned_each_pod_and_says_so() -> None:
    cluster, writer = synced_cluster(nodepool(), 3, cpu="3"), FakeWriter()
    told: list[str] = []
    p = provisioner(cluster, writer)
    p.round.planned = told.extend
    cluster.pod_plans.plan("default/p0", "an-older-plan")

    result = await p.provision()

    names = {nc["metadata"]["name"] for nc in writer.created}
    targets = {k: cluster.pod_plans.target(k) for k in ("default/p0", "default/p1", "default/p2")}
    assert set(targets.values()) == names == set(result.created)
    assert sum(len(cluster.pod_plans.pods_for(n)) for n in names) == 3
    assert sorted(told) == ["default/p0", "default/p1", "default/p2"]


async def test_a_pod_without_a_home_loses_its_older_plan() -> None:
    cluster, writer = synced_cluster(nodepool(), 1, cpu="5000"), FakeWriter()  # fits no type
    cluster.pod_plans.plan("default/p0", "an-older-plan")

    result = await provisioner(cluster, writer).provision()

    assert result.errors == 1
    assert cluster.pod_plans.target("default/p0") is None
