"""Static drift: a static NodePool's drifted node is replaced by one of its template, one command
at a time, within its budgets and ``limits.nodes``, only once its scale-down is done."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.controllers.disruption.decide import Facts, next_command
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, condition, node, node_labels, nodeclaim, nodepool

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
TYPES = kwok_catalog()
C4 = "c-4x-amd64-linux"
ODA = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C4]},
]
LIFECYCLE = [condition(t) for t in ("Launched", "Registered", "Initialized")]


def drifted(at: str) -> list[dict[str, Any]]:
    return [*LIFECYCLE, condition("Drifted", reason="NodePoolDrifted", at=at)]


def cluster(
    nodes: dict[str, str | None],
    *,
    replicas: int | None = 2,
    limit: int | None = None,
    budget: str = "100%",
) -> Cluster:
    """One pool (static unless ``replicas`` is None) with a node per name; the value is when it
    drifted (None: not drifted)."""
    c = Cluster()
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    spec: dict[str, Any] = {"replicas": replicas} if replicas is not None else {}
    c.upsert_nodepool(
        nodepool(
            "p",
            requirements=ODA,
            limits={"nodes": str(limit)} if limit is not None else None,
            disruption={"consolidateAfter": "Never", "budgets": [{"nodes": budget}]},
            **spec,
        )
    )
    for name, at in nodes.items():
        c.upsert_node(node(name, labels=node_labels("p", C4)))
        c.upsert_nodeclaim(nodeclaim(name, pool="p", conditions=drifted(at) if at else LIFECYCLE))
    return c


def outcome(c: Cluster) -> tuple[str, list[str], list[str], dict[str, str]]:
    snap = c.snapshot(NOW)
    decision = next_command(
        Facts(snapshot=snap, instance_types=dict.fromkeys(snap.nodepools, TYPES), now=NOW)
    )
    if not decision.commands:
        return ("", [], [], dict(decision.unchanged))
    (cmd,) = decision.commands
    return (
        cmd.method.name,
        [x.name for x in cmd.candidates],
        [r.instance_type.name for r in cmd.replacements],
        dict(decision.unchanged),
    )


OLD, NEW = "2026-01-01T00:10:00Z", "2026-01-01T00:20:00Z"
STATIC = "NodePool 'p' is static (spec.replicas is set)"
# A drifted node another command goes ahead of: one command per pass.
NEXT = "no disruption method applies"
AT_LIMIT = (
    "drifted, but static NodePool is at its node limit and cannot stage a replacement "
    "(limits.nodes 2)"
)


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        pytest.param(
            cluster({"a": NEW, "b": OLD}),
            ("static-drift", ["b"], [C4], {"a": NEXT}),
            id="oldest-drift-first-with-a-replacement-of-the-template",
        ),
        pytest.param(
            cluster({"a": NEW, "b": OLD}, limit=3),
            ("static-drift", ["b"], [C4], {"a": NEXT}),
            id="room-under-limits-nodes",
        ),
        pytest.param(
            cluster({"a": NEW, "b": OLD}, limit=2),
            ("", [], [], {"a": AT_LIMIT, "b": AT_LIMIT}),
            id="at-limits-nodes-no-replacement-can-be-staged",
        ),
        pytest.param(
            cluster({"a": OLD, "b": None, "c": None}),
            (
                "",
                [],
                [],
                {
                    "a": "static NodePool has 3 nodes for 2 replicas: scale-down first",
                    "b": STATIC,
                    "c": STATIC,
                },
            ),
            id="scale-down-before-drift",
        ),
        pytest.param(
            cluster({"a": OLD, "b": None}, budget="0"),
            ("", [], [], {"a": "budget 0 for Drifted", "b": STATIC}),
            id="within-the-drifted-budget",
        ),
        pytest.param(
            cluster({"a": OLD, "b": None}, replicas=None),
            (
                "drift",
                ["a"],
                [],
                {"b": "NodePool 'p' has consolidateAfter: Never (consolidation is off)"},
            ),
            id="a-dynamic-pool-is-drift-s",
        ),
    ],
)
def test_static_drift(c: Cluster, expected: tuple[Any, ...]) -> None:
    assert outcome(c) == expected
