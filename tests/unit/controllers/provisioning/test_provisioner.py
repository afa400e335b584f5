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
from karpenter_py.model.core import Pod, node_from_dict
from karpenter_py.model.labels import (
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    TAINT_UNREGISTERED_KEY,
)
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.unit.fakes import FakeNodeAPI, FakeWriter
from tests.virtualtime import run_virtual


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


def pending(name: str, cpu: str = "1", memory: str = "1Gi") -> Pod:
    return factories.pod(
        name,
        uid=f"uid-{name}",
        cpu=cpu,
        memory=memory,
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


# ------------------------------------------------------------------ an early first round


@pytest.mark.parametrize(
    ("first_window", "rounds"),
    [
        # The first round takes what came in its first second; the second, at idle after the
        # stream, places the rest (the first round's pods held on its NodeClaim).
        (1.0, [(1.0, 3, 0, 1), (4.0, 9, 3, 1)]),
        # Upstream's batching: one round once the stream has been idle for a second.
        (None, [(4.0, 9, 0, 1)]),
    ],
)
def test_a_stream_of_pods_launches_its_first_nodeclaim_after_the_first_window(
    first_window: float | None, rounds: list[tuple[float, int, int, int]]
) -> None:
    """Nine pods arrive 0.375 s apart (3 s in all) on virtual time; each round as (loop time,
    pods, pods held, NodeClaims created)."""

    async def scenario() -> list[tuple[float, int, int, int]]:
        loop = asyncio.get_running_loop()
        cluster = synced_cluster(nodepool(), 0)
        seen: list[tuple[float, int, int, int]] = []
        p = Provisioner(
            RoundRunner(
                cluster=cluster,
                writer=FakeWriter(),
                cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
                clock=FakeClock(),
            ),
            Batcher(idle=1.0, max_window=10.0, first_window=first_window),
            observe=lambda r: seen.append((loop.time(), r.pods, r.held, len(r.created))),
        )
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(p.run())
            for i in range(9):
                await asyncio.sleep(0.375 * i - loop.time())
                pod = pending(f"p{i}", cpu="900m")
                cluster.upsert_pod(pod)
                p.on_pod(pod)
            await asyncio.sleep(5)  # past the last round
            running.cancel()
        return seen

    assert run_virtual(scenario) == rounds


# ------------------------------------------------------------------ holds


SMALL = [pending(f"s{i}", cpu="900m", memory="3100Mi") for i in range(4)]
BIG = pending("big", cpu="3500m", memory="7Gi")


@pytest.mark.parametrize(
    ("hold", "second_claim", "held", "plans"),
    [
        # The round-1 pods stay on the NodeClaim sized for them; the big pod gets its own.
        (
            True,
            {"cpu": "3500m", "memory": "7Gi", "pods": "1"},
            4,
            {"default/big": "default-00001"} | {f"default/s{i}": "default-00000" for i in range(4)},
        ),
        # Placed anew: the round fills the capacity in flight as a whole (scheduling.fill), not
        # largest first on the first node with room as upstream, and ends the same way.
        (
            False,
            {"cpu": "3500m", "memory": "7Gi", "pods": "1"},
            0,
            {"default/big": "default-00001"} | {f"default/s{i}": "default-00000" for i in range(4)},
        ),
    ],
)
async def test_a_round_packs_new_pods_around_those_held_on_capacity_in_flight(
    hold: bool, second_claim: dict[str, str], held: int, plans: dict[str, str]
) -> None:
    cluster, writer = synced_cluster(nodepool(), 0), FakeWriter()
    p = Provisioner(
        RoundRunner(
            cluster=cluster,
            writer=writer,
            cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
            clock=FakeClock(),
        ),
        Batcher(idle=1.0, max_window=10.0),
        hold=hold,
    )
    for pod in SMALL:
        cluster.upsert_pod(pod)
    first = await p.provision()
    cluster.upsert_pod(BIG)
    second = await p.provision()
    assert (first.created, second.created) == (("default-00000",), ("default-00001",))
    assert writer.created[0]["spec"]["resources"]["requests"] == {
        "cpu": "3600m",
        "memory": "12400Mi",
        "pods": "4",
    }
    assert writer.created[1]["spec"]["resources"]["requests"] == second_claim
    assert (second.pods, second.held, second.placed_on_existing) == (5, held, 4)
    assert {k: cluster.pod_plans.target(k) for k in plans} == plans  # where round 2 put each


async def test_holds_end_when_the_node_is_initialized() -> None:
    """Once the kube-scheduler may bind to the node, pods still pending are placed as upstream
    places them: the initialized node is capacity like any other."""
    cluster, writer = synced_cluster(nodepool(), 0), FakeWriter()
    api = FakeNodeAPI()
    cloud = KwokCloudProvider(api, kwok_catalog())
    p = Provisioner(
        RoundRunner(cluster=cluster, writer=writer, cloud=cloud, clock=FakeClock()),
        Batcher(idle=1.0, max_window=10.0),
    )
    for pod in SMALL:
        cluster.upsert_pod(pod)
    (name,) = (await p.provision()).created
    launched = await cloud.create(cluster.nodeclaims[name])
    cluster.upsert_nodeclaim(launched)
    # The kwok Node registers and initializes (what the nodeclaim lifecycle controller does).
    body = api.nodes[launched.status.node_name or name]
    body["spec"]["taints"] = [
        t for t in body["spec"]["taints"] if t["key"] != TAINT_UNREGISTERED_KEY
    ]
    body["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    body["metadata"]["labels"] |= {LABEL_NODE_REGISTERED: "true", LABEL_NODE_INITIALIZED: "true"}
    cluster.upsert_node(node_from_dict(body))
    again = await p.provision()
    assert (again.pods, again.held, again.placed_on_existing, again.created) == (4, 0, 4, ())
