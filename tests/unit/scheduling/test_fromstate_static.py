"""``fromstate.solve_input`` leaves static NodePools (``spec.replicas``) out of the pools pods may
launch into, gate on or off, as upstream's provisioner does; their nodes still take pods."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, node, node_labels, nodeclaim, nodepool

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("replicas", "pools"),
    [
        pytest.param({"a": None, "b": None}, ["a", "b"], id="dynamic-pools-launch"),
        pytest.param({"a": 2, "b": None}, ["b"], id="a-static-pool-never-launches-for-pods"),
        pytest.param({"a": 0, "b": 3}, [], id="zero-replicas-is-static-too"),
    ],
)
def test_static_pools_take_no_pods_as_new_nodes(
    replicas: dict[str, int | None], pools: list[str]
) -> None:
    c = Cluster()
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    for name, n in replicas.items():
        c.upsert_nodepool(nodepool(name) if n is None else nodepool(name, replicas=n))
    c.upsert_node(node("a-1", labels=node_labels("a", "c-4x-amd64-linux")))
    c.upsert_nodeclaim(nodeclaim("a-1", pool="a"))
    inp = solve_input(c.snapshot(NOW), instance_types={}, options=SolveOptions())
    assert ([p.name for p in inp.pools], [e.node.name for e in inp.existing]) == (pools, ["a-1"])
