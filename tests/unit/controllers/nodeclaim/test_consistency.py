"""The NodeShape consistency check: the 90 % rule, and the 10-minute controller around it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeclaim.consistency import (
    NodeClaimConsistency,
    node_shape_issues,
    should_check,
)
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.events import EventRecorder, EventType
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeKube, deps, into_cluster, wire

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
EXPECTED = {"cpu": "4", "memory": "16Gi", "pods": "110"}


def claim(
    *,
    requests: dict[str, Any] | None = None,
    capacity: dict[str, str] | None = None,
    initialized: bool = True,
    deleting: bool = False,
    rv: str = "1",
) -> NodeClaim:
    meta: dict[str, Any] = {"name": "nc1", "uid": "uid-nc1", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
        meta["finalizers"] = ["karpenter.sh/termination"]
    conditions = []
    if initialized:
        conditions.append(
            {
                "type": "Initialized",
                "status": "True",
                "reason": "Initialized",
                "lastTransitionTime": "2026-01-01T11:00:00Z",
            }
        )
    return NodeClaim.model_validate(
        {
            "metadata": meta,
            "spec": {
                "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
                "requirements": [],
                "resources": {
                    "requests": requests if requests is not None else {"cpu": "1", "memory": "1Gi"}
                },
            },
            "status": {
                "providerID": "fake://n1",
                "capacity": capacity if capacity is not None else EXPECTED,
                "conditions": conditions,
            },
        }
    )


def node(capacity: dict[str, str]) -> Node:
    return factories.node("n1", provider_id="fake://n1", capacity=capacity)


@pytest.mark.parametrize(
    ("found", "issues"),
    [
        (EXPECTED, []),
        ({"cpu": "4", "memory": "15Gi", "pods": "110"}, []),  # 93.75 %: within tolerance
        ({"cpu": "3600m", "memory": "16Gi"}, []),  # exactly 90 %; pods were not requested
        (
            {"cpu": "3", "memory": "16Gi"},
            ["expected 4 of resource cpu, but found 3 (75.0% of expected)"],
        ),
        (
            {"cpu": "4", "memory": "8Gi"},
            ["expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"],
        ),
        (
            {},
            [
                "expected 4 of resource cpu, but found 0 (0.0% of expected)",
                "expected 16Gi of resource memory, but found 0 (0.0% of expected)",
            ],
        ),
    ],
)
def test_node_shape_ninety_percent_rule(found: dict[str, str], issues: list[str]) -> None:
    assert node_shape_issues(claim(), node(found)) == issues


def test_only_requested_and_expected_resources_are_compared() -> None:
    shrunk = node({"cpu": "1", "memory": "1Gi"})
    # Not requested (zero request), or no expected capacity: nothing to hold the node to.
    assert node_shape_issues(claim(requests={"cpu": "0", "memory": "1Gi"}), shrunk) == [
        "expected 16Gi of resource memory, but found 1Gi (6.2% of expected)"
    ]
    assert node_shape_issues(claim(capacity={"cpu": "4"}), shrunk) == [
        "expected 4 of resource cpu, but found 1 (25.0% of expected)"
    ]


def test_uninitialized_and_deleting_nodeclaims_are_not_checked() -> None:
    shrunk = node({"cpu": "1", "memory": "1Gi"})
    assert not should_check(claim(initialized=False))
    assert node_shape_issues(claim(initialized=False), shrunk) == []
    assert node_shape_issues(claim(deleting=True), shrunk) == []


def patches(client: FakeKube) -> list[Any]:
    """The NodeClaim status merge patches written, each guarded by the cached resourceVersion."""
    calls = client.calls_of("patch")
    assert {(c.plural, c.subresource, c.patch_type) for c in calls} <= {
        ("nodeclaims", "status", PatchType.MERGE)
    }
    assert all("resourceVersion" in c.body["metadata"] for c in calls)
    return [c.body for c in calls]


class CapturingRecorder(EventRecorder):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.recorded: list[tuple[str, str, str]] = []

    def record(
        self,
        involved: KubeObject,
        reason: str,
        message: str,
        *,
        event_type: EventType = "Normal",
        dedupe: bool = True,
        dedupe_values: tuple[str, ...] | None = None,
        dedupe_window: float | None = None,
    ) -> None:
        self.recorded.append((reason, event_type, message))


def setup(
    nc: NodeClaim, found: dict[str, str]
) -> tuple[NodeClaimConsistency, FakeKube, CapturingRecorder, FakeClock]:
    clock = FakeClock(NOW)
    cluster = Cluster()
    cluster.upsert_nodeclaim(nc)
    cluster.upsert_node(node(found))
    client = FakeKube((NODECLAIMS, wire(nc)), on_write=into_cluster(cluster))
    recorder = CapturingRecorder(client, clock=clock)
    controller = NodeClaimConsistency(
        deps(client=client, cluster=cluster, recorder=recorder, clock=clock)
    )
    return controller, client, recorder, clock


def consistent(controller: NodeClaimConsistency) -> tuple[str, str, str] | None:
    c = controller.deps.cluster.nodeclaims["nc1"].status.get_condition("ConsistentStateFound")
    return None if c is None else (c.status, c.reason, c.message)


async def test_a_consistent_node_sets_the_condition_true_once() -> None:
    controller, client, recorder, _ = setup(claim(), EXPECTED)
    result = await controller.reconcile("nc1")
    assert result is not None
    assert result.requeue_after == 600.0
    assert consistent(controller) == ("True", "ConsistentStateFound", "")
    assert recorder.recorded == []
    assert len(patches(client)) == 1


async def test_a_shrunk_node_fails_the_check_and_is_rechecked_every_ten_minutes() -> None:
    controller, client, recorder, clock = setup(claim(), {"cpu": "2", "memory": "16Gi"})
    await controller.reconcile("nc1")
    issue = "expected 4 of resource cpu, but found 2 (50.0% of expected)"
    assert consistent(controller) == ("False", "ConsistencyCheckFailed", issue)
    assert recorder.recorded == [("FailedConsistencyCheck", "Warning", issue)]

    # Triggers inside the period do nothing; a reconcile only reschedules.
    controller.on_nodeclaim({"metadata": {"name": "nc1", "uid": "uid-nc1"}})
    assert len(controller.queue) == 0
    clock.step(60)
    result = await controller.reconcile("nc1")
    assert result is not None
    assert result.requeue_after == pytest.approx(540.0)
    assert len(patches(client)) == 1
    assert len(recorder.recorded) == 1

    # Fixed in the meantime: the next scan flips the condition back.
    controller.deps.cluster.upsert_node(node(EXPECTED))
    clock.step(540)
    result = await controller.reconcile("nc1")
    assert result is not None
    assert result.requeue_after == 600.0
    assert consistent(controller) == ("True", "ConsistentStateFound", "")


async def test_an_uninitialized_nodeclaim_waits_for_initialization() -> None:
    controller, client, _, _ = setup(claim(initialized=False), {})
    assert await controller.reconcile("nc1") is None
    assert patches(client) == []
    controller.on_nodeclaim({"metadata": {"name": "nc1", "uid": "uid-nc1"}})
    assert len(controller.queue) == 1  # not marked scanned: the Initialized update gets through
    controller.on_nodeclaim_deleted({"metadata": {"name": "nc1", "uid": "uid-nc1"}})
