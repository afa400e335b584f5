"""One rule for a NodePool's usage against its limits (``state.usage.nodepool_usage``): nodes at
their capacity, launched NodeClaims at theirs, NodeClaims in flight at their reserved or
requested size (upstream charges them, so a burst cannot overshoot the limits)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.usage import nodepool_usage
from tests.factories import node, node_labels

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
GI = 2**30


def claim(
    name: str,
    *,
    pool: str = "p",
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    node_name: str = "",
) -> NodeClaim:
    status: dict[str, Any] = {"capacity": capacity or {}, "allocatable": allocatable or {}}
    if node_name:
        status["nodeName"] = node_name
        status["providerID"] = f"kwok://{node_name}"
    return NodeClaim.model_validate(
        {
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {
                "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
                "requirements": [],
                "resources": {"requests": requests or {}},
            },
            "status": status,
        }
    )


@dataclass
class Case:
    claims: list[NodeClaim] = field(default_factory=list)
    nodes: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # name, pool, alloc
    reserved: dict[str, dict[str, int]] = field(default_factory=dict)
    want: dict[str, dict[str, int]] = field(default_factory=dict)


CASES = {
    "empty": Case(want={}),
    "node with its claim counts once, at the node's capacity": Case(
        nodes=[("a", "p", {"cpu": "4", "memory": "16Gi", "pods": "110"})],
        claims=[claim("nc-a", capacity={"cpu": "8"}, node_name="a")],
        want={"p": {"cpu": 4000, "memory": 16 * GI, "pods": 110, "nodes": 1}},
    ),
    "unmanaged node is nobody's": Case(nodes=[("u", "", {"cpu": "4"})], want={}),
    "launched claim without its node: status.capacity": Case(
        claims=[claim("c", capacity={"cpu": "2", "memory": "4Gi"}, requests={"cpu": "1"})],
        want={"p": {"cpu": 2000, "memory": 4 * GI, "nodes": 1}},
    ),
    "launched claim with only status.allocatable: that": Case(
        claims=[claim("c", allocatable={"cpu": "1500m"})],
        want={"p": {"cpu": 1500, "nodes": 1}},
    ),
    "claim not launched: its requests": Case(
        claims=[claim("c", requests={"cpu": "1", "memory": "1Gi"})],
        want={"p": {"cpu": 1000, "memory": GI, "nodes": 1}},
    ),
    "claim not launched, reserved by the launcher: the reservation": Case(
        claims=[claim("c", requests={"cpu": "1"})],
        reserved={"c": {"cpu": 16000, "memory": 32 * GI}},
        want={"p": {"cpu": 16000, "memory": 32 * GI, "nodes": 1}},
    ),
    "reservation ends when the claim reports its capacity": Case(
        claims=[claim("c", capacity={"cpu": "4"})],
        reserved={"c": {"cpu": 16000}},
        want={"p": {"cpu": 4000, "nodes": 1}},
    ),
    "two pools": Case(
        nodes=[("a", "p", {"cpu": "4"}), ("b", "q", {"cpu": "2"})],
        claims=[claim("c", pool="q", requests={"cpu": "500m"})],
        want={"p": {"cpu": 4000, "nodes": 1}, "q": {"cpu": 2500, "nodes": 2}},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_nodepool_usage(case: Case) -> None:
    cluster = Cluster()
    for name, pool, alloc in case.nodes:
        labels = node_labels(pool, "it") if pool else {}
        cluster.upsert_node(node(name, labels=labels, allocatable=alloc))
    for nc in case.claims:
        cluster.upsert_nodeclaim(nc)
    for name, capacity in case.reserved.items():
        cluster.reserve(name, capacity)
    assert nodepool_usage(cluster.snapshot(NOW).nodes) == case.want
