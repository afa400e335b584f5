"""``nodeclaim.disruption`` end to end over an in-memory cluster: the exact conditions written
(type, status, reason), one status patch per change, and the exact requeue times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeclaim.disruption import NodeClaimDisruption
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.base import format_time
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import Offering, make_instance_type
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, into_cluster, wire

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
DRIFT_REQUEUE = 300.0


def pool(
    name: str = "pool",
    *,
    consolidate_after: str = "5m",
    requirements: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> NodePool:
    return factories.nodepool(
        name,
        requirements=requirements,
        labels=labels,
        disruption={"consolidateAfter": consolidate_after},
    )


def condition(type_: str, status: str, at: datetime, reason: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason or type_,
        "message": "",
        "lastTransitionTime": format_time(at),
    }


def claim(
    name: str = "nc",
    *,
    nodepool: str = "pool",
    launched: bool = True,
    initialized_at: datetime | None = NOW - timedelta(minutes=2),
    last_pod_event: datetime | None = None,
    created: datetime = NOW - timedelta(minutes=10),
    hash_of: NodePool | None = None,
    conditions: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> NodeClaim:
    conds = list(conditions or [])
    if launched:
        conds.append(condition("Launched", "True", created))
    if initialized_at is not None:
        conds.append(condition("Initialized", "True", initialized_at))
    nc = factories.nodeclaim(
        name,
        pool=nodepool,
        uid=f"uid-{name}",
        resource_version="1",
        created=format_time(created),
        labels={
            "node.kubernetes.io/instance-type": "m-4x",
            "topology.kubernetes.io/zone": "z1",
            "karpenter.sh/capacity-type": "on-demand",
            **(labels or {}),
        },
        annotations={
            "karpenter.sh/nodepool-hash": nodepool_hash(hash_of or pool(nodepool)),
            "karpenter.sh/nodepool-hash-version": "v3",
        },
        conditions=conds,
    )
    if last_pod_event is not None:
        nc.status.last_pod_event_time = last_pod_event
    return nc


M4X = make_instance_type(
    name="m-4x",
    requirements={"kubernetes.io/arch": "amd64"},
    capacity={"cpu": 4000, "memory": 16 << 30, "pods": 110},
    offerings=(Offering(zone="z1", capacity_type="on-demand", price=0.2),),
)


def patches(client: FakeKube) -> list[Any]:
    """The status merge patches written: only ``status.conditions``, guarded by the cached
    resourceVersion."""
    calls = client.calls_of("patch")
    assert {(c.plural, c.subresource, c.patch_type) for c in calls} <= {
        ("nodeclaims", "status", PatchType.MERGE)
    }
    assert all(set(c.body["metadata"]) == {"resourceVersion"} for c in calls)
    assert all(set(c.body["status"]) == {"conditions"} for c in calls)
    return [c.body for c in calls]


def setup(
    *claims: NodeClaim, pools: tuple[NodePool, ...] | None = None
) -> tuple[NodeClaimDisruption, FakeKube, FakeCloudProvider, FakeClock]:
    clock = FakeClock(NOW)
    cluster = Cluster()
    for np in pools if pools is not None else (pool(),):
        cluster.upsert_nodepool(np)
    for nc in claims:
        cluster.upsert_nodeclaim(nc)
    client = FakeKube(*((NODECLAIMS, wire(nc)) for nc in claims), on_write=into_cluster(cluster))
    cloud = FakeCloudProvider(instance_types=[M4X])
    recorder = EventRecorder(client, clock=clock)
    controller = NodeClaimDisruption(
        deps(client=client, cluster=cluster, cloud=cloud, recorder=recorder, clock=clock)
    )
    return controller, client, cloud, clock


def cond(controller: NodeClaimDisruption, type_: str, name: str = "nc") -> tuple[str, str] | None:
    c = controller.deps.cluster.nodeclaims[name].status.get_condition(type_)
    return None if c is None else (c.status, c.reason)


def message(controller: NodeClaimDisruption, type_: str, name: str = "nc") -> str:
    c = controller.deps.cluster.nodeclaims[name].status.get_condition(type_)
    assert c is not None
    return c.message


async def requeue(controller: NodeClaimDisruption, key: str = "nc") -> float | None:
    result = await controller.reconcile(key)
    return None if result is None else result.requeue_after


# ----------------------------------------------------------------------------- Consolidatable


async def test_consolidatable_flips_at_the_exact_moment_consolidate_after_has_passed() -> None:
    controller, client, _, clock = setup(claim())  # initialized 2 min ago, consolidateAfter 5m
    assert await requeue(controller) == 180.0
    assert cond(controller, "Consolidatable") == ("False", "ConsolidateAfterPending")
    assert message(controller, "Consolidatable") == (
        "consolidatable at 2026-01-01T12:03:00Z (consolidateAfter 5m since initialization)"
    )
    assert len(patches(client)) == 1

    clock.step(179)
    assert await requeue(controller) == 1.0
    assert len(patches(client)) == 1  # nothing changed: nothing written

    clock.step(1)
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Consolidatable") == ("True", "Consolidatable")
    c = controller.deps.cluster.nodeclaims["nc"].status.get_condition("Consolidatable")
    assert c is not None
    assert c.last_transition_time == NOW + timedelta(seconds=180)
    assert len(patches(client)) == 2


async def test_consolidate_after_is_measured_from_the_last_pod_event() -> None:
    nc = claim(initialized_at=NOW - timedelta(hours=1), last_pod_event=NOW - timedelta(seconds=30))
    controller, _, _, _ = setup(nc)
    assert await requeue(controller) == 270.0
    assert cond(controller, "Consolidatable") == ("False", "ConsolidateAfterPending")
    assert message(controller, "Consolidatable") == (
        "consolidatable at 2026-01-01T12:04:30Z (consolidateAfter 5m since the last pod event)"
    )


async def test_a_new_pod_event_turns_a_consolidatable_nodeclaim_back() -> None:
    controller, client, _, clock = setup(claim(initialized_at=NOW - timedelta(hours=1)))
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Consolidatable") == ("True", "Consolidatable")
    clock.step(60)
    current = controller.deps.cluster.nodeclaims["nc"].model_copy(deep=True)
    current.status.last_pod_event_time = clock.now()
    controller.deps.cluster.upsert_nodeclaim(current)
    assert await requeue(controller) == 300.0  # min(drift 300, consolidatable in 300)
    assert cond(controller, "Consolidatable") == ("False", "ConsolidateAfterPending")
    assert len(patches(client)) == 2


async def test_zero_consolidate_after_is_consolidatable_at_once() -> None:
    controller, _, _, _ = setup(claim(), pools=(pool(consolidate_after="0s"),))
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Consolidatable") == ("True", "Consolidatable")


async def test_never_removes_the_consolidatable_condition() -> None:
    nc = claim(conditions=[condition("Consolidatable", "True", NOW - timedelta(hours=1))])
    controller, client, _, _ = setup(nc, pools=(pool(consolidate_after="Never"),))
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Consolidatable") is None
    assert len(patches(client)) == 1


async def test_uninitialized_nodeclaims_are_not_consolidatable() -> None:
    nc = claim(
        initialized_at=None,
        conditions=[
            condition("Initialized", "Unknown", NOW, reason="NodeNotReady"),
            condition("Consolidatable", "True", NOW - timedelta(hours=1)),
        ],
    )
    controller, _, _, _ = setup(nc)
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Consolidatable") is None


# ----------------------------------------------------------------------------- Drifted


async def test_an_undrifted_nodeclaim_writes_nothing_about_drift_and_polls_every_five_minutes() -> (
    None
):
    controller, _, cloud, _ = setup(claim(initialized_at=NOW - timedelta(hours=1)))
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Drifted") is None
    assert len(cloud.drift_calls) == 1
    assert len(cloud.instance_type_calls) == 0  # younger than 1 h: instance types are not asked for


async def test_a_template_edit_is_nodepool_drift_without_asking_the_cloud() -> None:
    edited = pool(labels={"team": "b"})
    controller, client, cloud, _ = setup(claim(hash_of=pool()), pools=(edited,))
    assert await requeue(controller) == 180.0  # consolidatable sooner than the drift poll
    assert cond(controller, "Drifted") == ("True", "NodePoolDrifted")
    assert message(controller, "Drifted") == "NodePoolDrifted"
    assert (len(cloud.instance_type_calls), len(cloud.drift_calls)) == (0, 0)
    assert len(patches(client)) == 1


async def test_requirements_drift() -> None:
    np = pool(
        requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    )
    controller, _, cloud, _ = setup(claim(hash_of=np), pools=(np,))
    await controller.reconcile("nc")
    assert cond(controller, "Drifted") == ("True", "RequirementsDrifted")
    assert len(cloud.drift_calls) == 0


async def test_provider_drift_is_set_and_removed_again() -> None:
    controller, client, cloud, clock = setup(claim(initialized_at=NOW - timedelta(hours=1)))
    cloud.drifted = "NodeClassDrifted"
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Drifted") == ("True", "NodeClassDrifted")
    clock.step(DRIFT_REQUEUE)
    assert await requeue(controller) == DRIFT_REQUEUE
    assert len(patches(client)) == 1  # still drifted, same reason: nothing written
    cloud.drifted = ""
    clock.step(DRIFT_REQUEUE)
    assert await requeue(controller) == DRIFT_REQUEUE
    assert cond(controller, "Drifted") is None  # removed, not set False
    assert len(patches(client)) == 2


async def test_unlaunched_nodeclaims_lose_the_drifted_condition_and_are_not_polled() -> None:
    nc = claim(
        launched=False,
        initialized_at=None,
        conditions=[condition("Drifted", "True", NOW, reason="NodeClassDrifted")],
    )
    controller, _, cloud, _ = setup(nc)
    cloud.drifted = "NodeClassDrifted"
    assert await requeue(controller) is None
    assert cond(controller, "Drifted") is None
    assert len(cloud.drift_calls) == 0


async def test_instance_type_check_waits_for_an_hour_of_age_then_runs_every_thirty_minutes() -> (
    None
):
    nc = claim(created=NOW - timedelta(minutes=50), initialized_at=NOW - timedelta(minutes=45))
    controller, client, cloud, clock = setup(nc)
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 0
    clock.step(10 * 60)  # 1 h old
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 1
    assert cond(controller, "Drifted") is None
    clock.step(DRIFT_REQUEUE)
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 1  # found 5 min ago: not asked again
    clock.step(25 * 60)  # 30 min after the last check that found the type
    cloud.instance_types = []  # an empty answer is no answer
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 2
    assert cond(controller, "Drifted") is None
    cloud.instance_types = [
        make_instance_type(name="c-4x", requirements={}, capacity={}, offerings=())
    ]
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 3  # an empty answer is not remembered as a success
    assert cond(controller, "Drifted") == ("True", "InstanceTypeNotFound")
    drift_calls = len(cloud.drift_calls)
    await controller.reconcile("nc")
    assert len(cloud.instance_type_calls) == 4  # a missing type is confirmed on every reconcile
    assert len(cloud.drift_calls) == drift_calls  # the provider is not asked once a reason is found
    # Consolidatable once, then Drifted once; the confirmations changed nothing.
    assert len(patches(client)) == 2
    drifted = [c for c in patches(client)[1]["status"]["conditions"] if c["type"] == "Drifted"]
    assert [(c["status"], c["reason"]) for c in drifted] == [("True", "InstanceTypeNotFound")]


async def test_a_cloud_error_keeps_drift_as_it_was_but_still_writes_consolidatable() -> None:
    nc = claim(
        created=NOW - timedelta(hours=2),
        conditions=[condition("Drifted", "True", NOW - timedelta(hours=1), "NodeClassDrifted")],
    )
    controller, client, cloud, _ = setup(nc)
    cloud.fail("get_instance_types", RuntimeError("throttled"))
    with pytest.raises(RuntimeError, match="throttled"):
        await controller.reconcile("nc")
    assert cond(controller, "Drifted") == ("True", "NodeClassDrifted")
    assert cond(controller, "Consolidatable") == ("False", "ConsolidateAfterPending")
    assert len(patches(client)) == 1


async def test_nodeclaims_without_a_known_nodepool_or_being_deleted_are_left_alone() -> None:
    deleting = claim("gone").model_copy(deep=True)
    deleting.metadata.deletion_timestamp = NOW
    controller, client, cloud, _ = setup(claim("orphan", nodepool="other"), deleting)
    assert await requeue(controller, "orphan") is None
    assert await requeue(controller, "gone") is None
    assert await requeue(controller, "missing") is None
    assert patches(client) == []
    assert len(cloud.drift_calls) == 0


# ----------------------------------------------------------------------------- triggers


def test_a_nodepool_change_enqueues_exactly_its_nodeclaims() -> None:
    deleting = claim("c", nodepool="a").model_copy(deep=True)
    deleting.metadata.deletion_timestamp = NOW
    controller, _, _, _ = setup(
        claim("a1", nodepool="a"),
        claim("a2", nodepool="a"),
        claim("b1", nodepool="b"),
        deleting,
        pools=(pool("a"), pool("b")),
    )
    controller.on_nodepool({"metadata": {"name": "a"}})
    assert len(controller.queue) == 2
    controller.on_nodeclaim({"metadata": {"name": "b1"}})
    controller.on_nodeclaim(
        {"metadata": {"name": "c", "deletionTimestamp": "2026-01-01T12:00:00Z"}}
    )
    assert len(controller.queue) == 3
