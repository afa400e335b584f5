"""``fromstate.solve_input`` charges each pool what ``state.usage`` counts; a pool with none of its
nodes in the state keeps its ``status.resources``. NodeClaims in flight of unknown size take no
pods."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, node, node_labels, nodepool

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
GI = 2**30


def claim(name: str, requests: dict[str, str]) -> NodeClaim:
    """A NodeClaim of pool "p" that has not launched yet."""
    return NodeClaim.model_validate(
        {
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "p"}},
            "spec": {
                "nodeClassRef": {"group": "g", "kind": "K", "name": "d"},
                "requirements": [],
                "resources": {"requests": requests},
            },
        }
    )


def with_status(np: NodePool, resources: dict[str, str]) -> NodePool:
    return NodePool.model_validate(
        {**np.model_dump(by_alias=True, exclude_none=True), "status": {"resources": resources}}
    )


@pytest.mark.parametrize(
    ("status", "nodes", "claims", "reserved", "want"),
    [
        pytest.param({}, [], [], {}, {}, id="nothing"),
        pytest.param({"cpu": "3"}, [], [], {}, {"cpu": 3000}, id="no-nodes-status-stands"),
        pytest.param(
            {"cpu": "99"},
            [{"cpu": "4", "memory": "8Gi"}],
            [],
            {},
            {"cpu": 4000, "memory": 8 * GI, "nodes": 1},
            id="nodes-win-over-status",
        ),
        pytest.param(
            {},
            [{"cpu": "4"}],
            [claim("c", {"cpu": "1"})],
            {},
            {"cpu": 5000, "nodes": 2},
            id="claim-in-flight-at-requests",
        ),
        pytest.param(
            {},
            [],
            [claim("c", {"cpu": "1"})],
            {"c": {"cpu": 8000}},
            {"cpu": 8000, "nodes": 1},
            id="claim-in-flight-at-reservation",
        ),
    ],
)
def test_pool_usage_in_solve_input(
    status: dict[str, str],
    nodes: list[dict[str, str]],
    claims: list[NodeClaim],
    reserved: dict[str, dict[str, int]],
    want: dict[str, int],
) -> None:
    cluster = Cluster()
    cluster.upsert_nodepool(with_status(nodepool("p", limits={"cpu": "100"}), status))
    cluster.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    for i, alloc in enumerate(nodes):
        cluster.upsert_node(node(f"n{i}", labels=node_labels("p", "it"), allocatable=alloc))
    for nc in claims:
        cluster.upsert_nodeclaim(nc)
    for name, capacity in reserved.items():
        cluster.reserve(name, capacity)
    inp = solve_input(cluster.snapshot(NOW), instance_types={}, options=SolveOptions())
    (pool,) = inp.pools
    assert dict(pool.usage) == want
    assert pool.limits == {"cpu": 100_000}


def test_claim_in_flight_of_unknown_size_takes_no_pods() -> None:
    cluster = Cluster()
    cluster.upsert_nodeclaim(claim("sized", {"cpu": "1"}))
    cluster.upsert_nodeclaim(claim("unsized", {}))
    inp = solve_input(cluster.snapshot(NOW), instance_types={}, options=SolveOptions())
    assert [(e.node.name, dict(e.node.allocatable)) for e in inp.existing] == [
        ("sized", {"cpu": 1000})
    ]
