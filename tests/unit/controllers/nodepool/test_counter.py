"""NodePool counter: usage from cluster state, minimal status patches."""

from __future__ import annotations

from karpenter_py.controllers.nodepool.counter import pool_usage, status_patch
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.model.labels import LABEL_NODEPOOL
from karpenter_py.state.statenode import StateNode
from tests import factories


def node(name: str, pool: str, cpu: str) -> Node:
    return factories.node(
        name, labels={LABEL_NODEPOOL: pool}, allocatable={"cpu": cpu, "memory": "1Gi", "pods": "10"}
    )


def claim(
    name: str, pool: str, capacity: dict[str, str] | None, requests: dict[str, str] | None = None
) -> NodeClaim:
    return factories.nodeclaim(
        name, pool=pool, capacity=capacity or {}, conditions=[], resources=requests or {}
    )


def test_usage_counts_nodes_and_claims_of_the_pool_as_the_provisioner_charges_them() -> None:
    nodes = [
        StateNode(node=node("a", "p", "2"), nodeclaim=claim("a", "p", {"cpu": "2"})),
        StateNode(node=node("b", "other", "8"), nodeclaim=None),
        StateNode(node=None, nodeclaim=claim("c", "p", {"cpu": "4", "memory": "2Gi"})),  # launched
        # Not launched: charged at what it was sized for, as the provisioner charges it.
        StateNode(node=None, nodeclaim=claim("d", "p", None, {"cpu": "1", "pods": "3"})),
        # Not launched, reserved at its largest option by the launcher: charged at that.
        StateNode(
            node=None,
            nodeclaim=claim("e", "p", None, {"cpu": "1"}),
            reserved={"cpu": 8000, "memory": 2**30},
        ),
    ]
    assert pool_usage(nodes, "p") == {
        "cpu": 2000 + 4000 + 1000 + 8000,
        "memory": 2**30 + 2 * 2**30 + 2**30,
        "pods": 10 + 3,
        "ephemeral-storage": 0,
        "nodes": 4,
    }
    assert pool_usage([], "p") == {
        "cpu": 0,
        "memory": 0,
        "pods": 0,
        "ephemeral-storage": 0,
        "nodes": 0,
    }


def test_status_patch_only_when_changed() -> None:
    usage = {"cpu": 2000, "memory": 2**30, "pods": 10, "ephemeral-storage": 0, "nodes": 1}
    patch = status_patch({"cpu": "1", "gpu": "1"}, 0, usage)
    assert patch == {
        "status": {
            "resources": {
                "cpu": "2",
                "ephemeral-storage": "0",
                "memory": "1Gi",
                "nodes": "1",
                "pods": "10",
                "gpu": None,  # a resource no node has any more is removed
            },
            "nodes": 1,
        }
    }
    current = {
        "cpu": "2000m",
        "memory": "1073741824",
        "pods": "10",
        "ephemeral-storage": "0",
        "nodes": "1",
    }
    assert status_patch(current, 1, usage) is None  # equal quantities, other spelling
    assert status_patch(current, None, usage) is not None
