"""Static NodePools, pure: how many NodeClaims to launch, which extra ones go, what is launched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.controllers.static.decide import StaticDecision, decide, to_launch, to_remove
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.staticpool import Count, count, pool_members
from tests.factories import (
    KWOK_NODECLASS_KEY,
    daemonset_pod,
    node,
    node_labels,
    nodeclaim,
    nodepool,
    pod,
)

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
TYPES = kwok_catalog()
C4 = "c-4x-amd64-linux"
ODA = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C4]},
]
DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def static_pool(replicas: int, *, limit: int | None = None, name: str = "static") -> Any:
    return nodepool(
        name,
        requirements=ODA,
        limits={"nodes": str(limit)} if limit is not None else None,
        replicas=replicas,
    )


def cluster(
    replicas: int,
    members: list[dict[str, Any]],
    *,
    limit: int | None = None,
    nodeclass_ready: bool = True,
) -> Cluster:
    """A static pool and its NodeClaims, each given as {name, launched?, deleting?, tainted?,
    priority?, pods: [pod kwargs]}; a launched one has a Node of the same name."""
    c = Cluster()
    c.upsert_nodepool(static_pool(replicas, limit=limit))
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, nodeclass_ready)
    for m in members:
        name = m["name"]
        launched = m.get("launched", True)
        annotations = (
            {"karpenter.sh/deprovisioning-priority": m["priority"]} if "priority" in m else {}
        )
        c.upsert_nodeclaim(
            nodeclaim(
                name,
                pool="static",
                launched=launched,
                deleting="2026-01-01T00:30:00Z" if m.get("deleting") else None,
                annotations=annotations,
                created=m.get("created", "2026-01-01T00:00:00Z"),
            )
        )
        if launched:
            c.upsert_node(
                node(
                    name,
                    labels=node_labels("static", C4),
                    taints=[DISRUPTED] if m.get("tainted") else None,
                )
            )
        for i, kw in enumerate(m.get("pods", [])):
            factory = daemonset_pod if kw.pop("daemonset", False) else pod
            c.upsert_pod(factory(f"{name}-p{i}", node_name=name, **kw))
    return c


# ----------------------------------------------------------------------------- how many
@pytest.mark.parametrize(
    ("replicas", "limit", "counted", "expected"),
    [
        (3, None, Count(0, 0), (3, "")),
        (3, None, Count(3, 0), (0, "")),
        (3, None, Count(5, 0), (0, "")),
        # A node on its way out keeps its slot until it is gone.
        (3, None, Count(2, 1), (0, "")),
        (3, None, Count(1, 1), (1, "")),
        (5, 4, Count(0, 0), (4, "limits.nodes 4 allows 4 of the 5 missing")),
        (5, 4, Count(2, 1), (1, "limits.nodes 4 allows 1 of the 2 missing")),
        (5, 3, Count(3, 1), (0, "limits.nodes 3 allows 0 of the 1 missing")),
        (2, 4, Count(0, 0), (2, "")),
        (0, None, Count(0, 0), (0, "")),
    ],
)
def test_to_launch(
    replicas: int, limit: int | None, counted: Count, expected: tuple[int, str]
) -> None:
    assert to_launch(static_pool(replicas, limit=limit), counted) == expected


def test_count_takes_deleting_and_disruption_tainted_nodes_as_leaving() -> None:
    c = cluster(
        3,
        [
            {"name": "a"},
            {"name": "b", "deleting": True},
            {"name": "c", "tainted": True},
            {"name": "d", "launched": False},
        ],
    )
    members = pool_members(c.snapshot(NOW).nodes, "static")
    assert count(members) == Count(running=2, deleting=2)


# ----------------------------------------------------------------------------- which go
DND = {"karpenter.sh/do-not-disrupt": "true"}


@pytest.mark.parametrize(
    ("members", "excess", "expected"),
    [
        pytest.param([{"name": "a"}, {"name": "b"}], 0, (), id="nothing-extra"),
        pytest.param(
            [
                {"name": "busy", "pods": [{}]},
                {"name": "empty"},
                {"name": "unlaunched", "launched": False},
            ],
            2,
            ("unlaunched", "empty"),
            id="unlaunched-then-empty",
        ),
        pytest.param(
            [
                {"name": "u1", "launched": False},
                {"name": "u2", "launched": False, "priority": "5"},
                {"name": "u3", "launched": False, "priority": "x"},
            ],
            2,
            ("u2", "u1"),
            id="unlaunched-by-priority-then-name",
        ),
        pytest.param(
            [
                {"name": "ds-only", "pods": [{"daemonset": True}]},
                {"name": "done-only", "pods": [{"phase": "Succeeded"}]},
                {"name": "busy", "pods": [{}]},
            ],
            2,
            ("done-only", "ds-only"),
            id="daemonset-and-finished-pods-leave-a-node-empty",
        ),
        pytest.param(
            [
                {"name": "ds-protected", "pods": [{"daemonset": True, "annotations": DND}]},
                {"name": "busy", "pods": [{}]},
            ],
            1,
            ("busy",),
            id="a-protected-daemonset-pod-makes-a-node-not-empty-and-last",
        ),
        pytest.param(
            [
                {"name": "protected", "pods": [{"annotations": DND}]},
                {"name": "two", "pods": [{}, {}]},
                {"name": "one", "pods": [{}]},
            ],
            3,
            ("one", "two", "protected"),
            id="cheapest-first-protected-last",
        ),
        pytest.param(
            [
                {"name": "one", "pods": [{}]},
                {"name": "three-prio", "pods": [{}, {}, {}], "priority": "10"},
            ],
            1,
            ("three-prio",),
            id="priority-annotation-before-cost",
        ),
        pytest.param(
            [
                # Half its 720h lifetime gone: 2 pods x 0.5 = 1.0 against the young node's 2.0.
                {"name": "old", "pods": [{}, {}], "created": "2025-12-17T01:00:00Z"},
                {"name": "young", "pods": [{}, {}]},
            ],
            1,
            ("old",),
            id="nodes-nearer-expiry-are-cheaper",
        ),
        pytest.param(
            [
                {"name": "gone", "deleting": True},
                {"name": "taken", "tainted": True},
                {"name": "busy", "pods": [{}]},
            ],
            1,
            ("busy",),
            id="leaving-nodes-are-not-picked-again",
        ),
    ],
)
def test_to_remove(members: list[dict[str, Any]], excess: int, expected: tuple[str, ...]) -> None:
    snap = cluster(1, members).snapshot(NOW)
    picked = to_remove(pool_members(snap.nodes, "static"), excess, snap.pods_by_node, NOW)
    assert picked == expected


# ----------------------------------------------------------------------------- the whole pool
def summary(d: StaticDecision) -> tuple[str, int, Count, list[str], tuple[str, ...], str]:
    return (
        d.pool,
        d.replicas,
        d.count,
        [nc.instance_type.name for nc in d.launch],
        d.remove,
        d.held_back,
    )


@pytest.mark.parametrize(
    ("replicas", "limit", "members", "ready", "expected"),
    [
        pytest.param(
            2, None, [], True, ("static", 2, Count(0, 0), [C4, C4], (), ""), id="from-nothing"
        ),
        pytest.param(
            3,
            None,
            [{"name": "a", "pods": [{}]}],
            True,
            ("static", 3, Count(1, 0), [C4, C4], (), ""),
            id="fill-up",
        ),
        pytest.param(
            1,
            None,
            [{"name": "a", "pods": [{}]}, {"name": "b"}],
            True,
            ("static", 1, Count(2, 0), [], ("b",), ""),
            id="scale-down",
        ),
        pytest.param(
            3,
            2,
            [],
            True,
            ("static", 3, Count(0, 0), [C4, C4], (), "limits.nodes 2 allows 2 of the 3 missing"),
            id="within-limits-nodes",
        ),
        pytest.param(
            2,
            None,
            [],
            False,
            ("static", 2, Count(0, 0), [], (), "its NodeClass is missing or not Ready"),
            id="nodeclass-not-ready",
        ),
    ],
)
def test_decide(
    replicas: int,
    limit: int | None,
    members: list[dict[str, Any]],
    ready: bool,
    expected: tuple[Any, ...],
) -> None:
    c = cluster(replicas, members, limit=limit, nodeclass_ready=ready)
    (d,) = decide(c.snapshot(NOW), {"static": TYPES})
    assert summary(d) == expected


def test_decide_launches_the_pool_template_for_no_pod() -> None:
    c = cluster(1, [])
    (d,) = decide(c.snapshot(NOW), {"static": TYPES})
    (nc,) = d.launch
    assert (nc.node_pool, nc.pods, [it.name for it in nc.instance_types]) == ("static", (), [C4])
    assert {r.key: list(r.values) for r in nc.requirements} == {
        "karpenter.sh/capacity-type": ["on-demand"],
        "node.kubernetes.io/instance-type": [C4],
        "karpenter.sh/nodepool": ["static"],
        "karpenter.kwok.sh/kwoknodeclass": ["default"],
    }


def test_dynamic_pools_are_not_decided_here() -> None:
    c = cluster(1, [])
    c.upsert_nodepool(nodepool("dynamic"))
    assert [d.pool for d in decide(c.snapshot(NOW), {"static": TYPES})] == ["static"]
