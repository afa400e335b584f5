"""Pod events: which pod changes count, and stamping lastPodEventTime at most every 10 s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeclaim.podevents import (
    NodeClaimPodEvents,
    PodState,
    dedupe_remaining,
    is_daemonset_pod,
    is_departure,
    is_pod_event,
    pod_state,
)
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import node_from_dict
from karpenter_py.state.cluster import Cluster
from tests.unit.fakes import FakeKube, deps, into_cluster, wire

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

UNBOUND = PodState("", terminal=False, terminating=False)
BOUND = PodState("n1", terminal=False, terminating=False)
TERMINAL = PodState("n1", terminal=True, terminating=False)
TERMINATING = PodState("n1", terminal=False, terminating=True)
BOTH = PodState("n1", terminal=True, terminating=True)


@pytest.mark.parametrize(
    ("previous", "current", "event"),
    [
        (None, UNBOUND, False),  # created pending
        (None, BOUND, True),  # first seen (after the first list) already on a node
        (UNBOUND, UNBOUND, False),
        (UNBOUND, BOUND, True),  # bound
        (BOUND, BOUND, False),  # status churn on a running pod
        (BOUND, TERMINAL, True),  # went terminal
        (BOUND, TERMINATING, True),  # started terminating
        (TERMINATING, TERMINATING, False),
        (TERMINAL, TERMINAL, False),
        (TERMINATING, BOTH, True),  # terminal after terminating: still a change
        (TERMINAL, BOTH, True),
        (BOTH, BOTH, False),
        (UNBOUND, PodState("", terminal=True, terminating=False), False),  # never on a node
    ],
)
def test_pod_event_transitions(previous: PodState | None, current: PodState, event: bool) -> None:
    assert is_pod_event(previous, current) is event


@pytest.mark.parametrize(
    ("previous", "departure"),
    [(None, False), (UNBOUND, False), (BOUND, True), (TERMINAL, False), (TERMINATING, False)],
)
def test_a_deleted_active_pod_left_its_node(previous: PodState | None, departure: bool) -> None:
    assert is_departure(previous) is departure


@pytest.mark.parametrize(
    ("last", "remaining"),
    [
        (None, 0.0),
        (NOW, 10.0),
        (NOW - timedelta(seconds=4), 6.0),
        (NOW - timedelta(seconds=10), 0.0),
        (NOW - timedelta(hours=1), 0.0),
        (NOW + timedelta(hours=1), 10.0),  # a clock ahead of ours never waits more than 10 s
    ],
)
def test_dedupe_window(last: datetime | None, remaining: float) -> None:
    assert dedupe_remaining(last, NOW) == remaining


def wire_pod(
    name: str,
    node: str = "",
    *,
    phase: str = "Running",
    deleting: bool = False,
    ds: bool = False,
) -> KubeObject:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    if ds:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}]
    spec: dict[str, Any] = {"containers": []}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_pod_state_from_the_wire() -> None:
    assert pod_state(wire_pod("p")) == UNBOUND
    assert pod_state(wire_pod("p", "n1", phase="Failed", deleting=True)) == BOTH
    assert is_daemonset_pod(wire_pod("p", ds=True))
    assert not is_daemonset_pod(wire_pod("p"))


def patches(client: FakeKube) -> list[tuple[str, Any]]:
    """The NodeClaim status merge patches written, the only writes this controller makes."""
    calls = client.calls_of("patch")
    assert {(c.plural, c.subresource, c.patch_type) for c in calls} <= {
        ("nodeclaims", "status", PatchType.MERGE)
    }
    return [(c.name, c.body) for c in calls]


def setup() -> tuple[NodeClaimPodEvents, FakeKube, FakeClock, Cluster]:
    clock = FakeClock(NOW)
    cluster = Cluster()
    for name in ("n1", "n2"):
        cluster.upsert_node(
            node_from_dict({"metadata": {"name": name}, "spec": {"providerID": f"fake://{name}"}})
        )
    nc = NodeClaim.model_validate(
        {
            "metadata": {"name": "nc1"},
            "spec": {
                "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
                "requirements": [],
            },
            "status": {"providerID": "fake://n1", "nodeName": "n1"},
        }
    )
    cluster.upsert_nodeclaim(nc)
    client = FakeKube((NODECLAIMS, wire(nc)), on_write=into_cluster(cluster))
    return (
        NodeClaimPodEvents(deps(client=client, cluster=cluster, clock=clock)),
        client,
        clock,
        cluster,
    )


def stamped(cluster: Cluster) -> datetime | None:
    return cluster.nodeclaims["nc1"].status.last_pod_event_time


async def test_the_first_list_stamps_nothing_and_a_bind_stamps_the_nodeclaim() -> None:
    controller, client, clock, cluster = setup()
    controller.on_pods_listed([wire_pod("old", "n1"), wire_pod("pending")])
    assert len(controller.queue) == 0
    controller.on_pod(wire_pod("old", "n1"))  # a status update of a running pod
    assert len(controller.queue) == 0

    clock.step(1)
    controller.on_pod(wire_pod("pending", "n1"))  # bound
    assert await controller.reconcile("n1") is None
    assert patches(client) == [("nc1", {"status": {"lastPodEventTime": "2026-01-01T12:00:01Z"}})]
    assert stamped(cluster) == NOW + timedelta(seconds=1)


async def test_writes_are_deduplicated_for_ten_seconds_and_the_latest_event_wins() -> None:
    controller, client, clock, cluster = setup()
    controller.on_pod(wire_pod("a", "n1"))
    await controller.reconcile("n1")
    assert len(patches(client)) == 1

    clock.step(3)
    controller.on_pod(wire_pod("a", "n1", phase="Succeeded"))  # terminal
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == pytest.approx(7.0)
    clock.step(2)
    controller.on_pod(wire_pod("b", "n1"))  # another event inside the window
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == pytest.approx(5.0)
    assert len(patches(client)) == 1

    clock.step(5)
    assert await controller.reconcile("n1") is None
    assert len(patches(client)) == 2
    assert stamped(cluster) == NOW + timedelta(seconds=5)  # the latest event's time

    # The window counts from the write (t=10), not from the stamped value (t=5).
    clock.step(1)
    controller.on_pod(wire_pod("b", "n1", deleting=True))
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == pytest.approx(9.0)


async def test_daemonset_pods_and_foreign_nodes_are_ignored() -> None:
    controller, client, _, _ = setup()
    controller.on_pod(wire_pod("ds", "n1", ds=True))
    assert len(controller.queue) == 0
    controller.on_pod(wire_pod("x", "n2"))  # n2 has no NodeClaim
    assert await controller.reconcile("n2") is None
    controller.on_pod(wire_pod("y", "elsewhere"))  # not even a Node we know
    assert await controller.reconcile("elsewhere") is None
    assert patches(client) == []


async def test_deletes() -> None:
    controller, client, clock, _ = setup()
    controller.on_pods_listed([wire_pod("a", "n1"), wire_pod("b", "n1", deleting=True)])
    controller.on_pod_deleted(wire_pod("b", "n1", deleting=True))  # seen terminating already
    assert len(controller.queue) == 0
    controller.on_pod_deleted(wire_pod("a", "n1"))  # force-deleted while running
    assert await controller.reconcile("n1") is None
    assert len(patches(client)) == 1
    controller.on_pod_deleted(wire_pod("never-seen", "n1"))
    clock.step(20)
    assert await controller.reconcile("n1") is None
    assert len(patches(client)) == 1


async def test_a_vanished_nodeclaim_is_not_an_error() -> None:
    controller, client, _, cluster = setup()
    controller.on_pod(wire_pod("a", "n1"))
    del cluster.nodeclaims["nc1"]
    assert await controller.reconcile("n1") is None
    assert patches(client) == []
