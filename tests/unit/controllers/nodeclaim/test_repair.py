"""Node repair's pure decision: which condition matches a policy, when its toleration runs out,
and when the unhealthy threshold blocks the repair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.cloudprovider.protocol import RepairPolicy
from karpenter_py.controllers.nodeclaim.repair import (
    Action,
    Health,
    decide,
    health_of,
    is_unhealthy,
    verdict_report,
)
from karpenter_py.model.core import Node
from tests import factories

# The AWS provider's policies, in its order (Ready 30 min, the accelerator 10 min).
POLICIES = [
    RepairPolicy("Ready", "False", 30 * 60.0),
    RepairPolicy("Ready", "Unknown", 30 * 60.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60.0),
    RepairPolicy("StorageReady", "False", 30 * 60.0),
]
T = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # the factories' nodes are created 2026-01-01
HEALTHY_SCOPE = Health(unhealthy=1, total=10)


def at(minutes: float) -> str:
    return (T + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(*conditions: dict[str, Any], name: str = "n1", pool: str = "default") -> Node:
    return factories.node(
        name, labels={"karpenter.sh/nodepool": pool} if pool else {}, conditions=list(conditions)
    )


def ready(status: str, since: float = 0) -> dict[str, Any]:
    return factories.condition("Ready", status, at=at(since))


def never_read() -> Health:
    raise AssertionError("the scope's health is read only once a repair is due")


@pytest.mark.parametrize(
    ("conditions", "now", "action", "condition", "repair_at"),
    [
        pytest.param([ready("True")], 60, Action.HEALTHY, None, None, id="ready"),
        pytest.param([ready("False")], 29.5, Action.WAIT, "Ready=False", 30, id="within"),
        pytest.param([ready("False")], 30, Action.REPAIR, "Ready=False", 30, id="at-toleration"),
        pytest.param([ready("Unknown", 5)], 36, Action.REPAIR, "Ready=Unknown", 35, id="unknown"),
        pytest.param(
            [ready("True"), factories.condition("AcceleratedHardwareReady", "False", at=at(0))],
            10,
            Action.REPAIR,
            "AcceleratedHardwareReady=False",
            10,
            id="accelerator-10m",
        ),
        pytest.param(
            [ready("False"), factories.condition("AcceleratedHardwareReady", "False", at=at(25))],
            31,
            Action.REPAIR,
            "Ready=False",
            30,
            id="first-due-decides",
        ),
        pytest.param(
            [ready("False"), factories.condition("AcceleratedHardwareReady", "False", at=at(5))],
            14,
            Action.WAIT,
            "AcceleratedHardwareReady=False",
            15,
            id="later-but-shorter-toleration",
        ),
        pytest.param(
            [ready("True"), factories.condition("StorageReady", "Unknown", at=at(0))],
            600,
            Action.HEALTHY,
            None,
            None,
            id="status-not-in-policy",
        ),
        pytest.param(
            [ready("True"), factories.condition("MemoryPressure", "True", at=at(0))],
            600,
            Action.HEALTHY,
            None,
            None,
            id="type-not-in-policy",
        ),
    ],
)
def test_policy_match_and_toleration(
    conditions: list[dict[str, Any]],
    now: float,
    action: Action,
    condition: str | None,
    repair_at: float | None,
) -> None:
    verdict = decide(
        node(*conditions),
        POLICIES,
        T + timedelta(minutes=now),
        nodepool="default",
        scope=lambda: HEALTHY_SCOPE,
    )
    assert verdict.action is action
    report = verdict_report(verdict)
    assert report.get("condition") == condition
    assert report.get("repairAt") == (None if repair_at is None else at(repair_at))


def test_a_waiting_node_is_requeued_for_the_moment_its_toleration_runs_out() -> None:
    verdict = decide(
        node(ready("False")),
        POLICIES,
        T + timedelta(minutes=29, seconds=59),
        nodepool="default",
        scope=never_read,
    )
    assert verdict.action is Action.WAIT
    assert verdict.seconds_until_due(T + timedelta(minutes=29, seconds=59)) == 1.0
    assert verdict.reason == (
        "Ready=False since 2026-03-01T10:00:00Z; repair at 2026-03-01T10:30:00Z (toleration 30m)"
    )


@pytest.mark.parametrize(
    ("condition", "repair_at"),
    [
        # No lastTransitionTime, or one that cannot be read: counted from the creation.
        pytest.param({"type": "Ready", "status": "False"}, "2026-01-01T00:30:00Z", id="absent"),
        pytest.param(
            factories.condition("Ready", "False", at="yesterday"),
            "2026-01-01T00:30:00Z",
            id="unreadable",
        ),
    ],
)
def test_a_condition_without_a_transition_time_counts_from_the_node_creation(
    condition: dict[str, Any], repair_at: str
) -> None:
    verdict = decide(node(condition), POLICIES, T, nodepool="default", scope=lambda: HEALTHY_SCOPE)
    assert verdict.action is Action.REPAIR
    assert verdict_report(verdict)["repairAt"] == repair_at


def test_a_transition_time_is_taken_as_written_even_before_the_node_existed() -> None:
    """As upstream's: only the condition's own time counts (the cluster tests write one)."""
    condition = factories.condition("Ready", "False", at="2025-06-01T00:00:00Z")
    verdict = decide(node(condition), POLICIES, T, nodepool="default", scope=lambda: HEALTHY_SCOPE)
    assert verdict_report(verdict)["repairAt"] == "2025-06-01T00:30:00Z"


@pytest.mark.parametrize(
    ("total", "allowed"),
    [(0, 0), (1, 1), (3, 1), (5, 1), (6, 2), (10, 2), (11, 3), (100, 20), (101, 21)],
)
def test_twenty_percent_of_the_scope_rounded_up_may_be_unhealthy(total: int, allowed: int) -> None:
    assert Health(unhealthy=0, total=total).allowed == allowed


@pytest.mark.parametrize(
    ("unhealthy", "total", "tripped"),
    [(1, 1, False), (1, 3, False), (2, 3, True), (2, 10, False), (3, 10, True), (3, 11, False)],
)
def test_the_threshold_trips_above_the_allowed_count(
    unhealthy: int, total: int, tripped: bool
) -> None:
    assert Health(unhealthy, total).tripped is tripped


def test_unhealthy_counts_every_match_whatever_its_toleration() -> None:
    nodes = [
        node(ready("True"), name="ok"),
        node(ready("False", 59), name="just-now"),  # within its toleration: still unhealthy
        node(ready("Unknown"), name="unknown"),
        node(ready("True"), factories.condition("KernelReady", "False"), name="kernel"),
    ]
    assert [is_unhealthy(n, POLICIES) for n in nodes] == [False, True, True, False]
    assert health_of(nodes, POLICIES) == Health(unhealthy=2, total=4)


@pytest.mark.parametrize(
    ("nodepool", "health", "action", "reason"),
    [
        pytest.param(
            "default",
            Health(unhealthy=2, total=10),
            Action.REPAIR,
            "Ready=False since 2026-03-01T10:00:00Z, past its toleration of 30m",
            id="within-threshold",
        ),
        pytest.param(
            "default",
            Health(unhealthy=3, total=10),
            Action.BLOCKED,
            "Ready=False since 2026-03-01T10:00:00Z; repair blocked: 3 of 10 nodes in NodePool "
            '"default" are unhealthy, more than the 20% (2) node repair allows',
            id="pool-over-threshold",
        ),
        pytest.param(
            "",
            Health(unhealthy=2, total=5),
            Action.BLOCKED,
            "Ready=False since 2026-03-01T10:00:00Z; repair blocked: 2 of 5 nodes in the cluster "
            "(the NodeClaim has no NodePool) are unhealthy, more than the 20% (1) node repair "
            "allows",
            id="standalone-over-cluster-threshold",
        ),
    ],
)
def test_the_threshold_blocks_a_due_repair(
    nodepool: str, health: Health, action: Action, reason: str
) -> None:
    verdict = decide(
        node(ready("False"), pool=nodepool),
        POLICIES,
        T + timedelta(hours=1),
        nodepool=nodepool,
        scope=lambda: health,
    )
    assert (verdict.action, verdict.reason, verdict.health) == (action, reason, health)
    assert verdict_report(verdict)["unhealthy"] == {
        "count": health.unhealthy,
        "of": health.total,
        "allowed": health.allowed,
    }
