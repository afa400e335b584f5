"""Cost gauges: offering, node and NodePool prices from a pass's facts, stale series removed,
and the blocked savings by reason (prices from the fake catalog)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from karpenter_py.controllers.disruption.cost import (
    CostMetrics,
    node_prices,
    nodepool_prices,
    offering_prices,
)
from karpenter_py.model.fakecatalog import fake_instance_type, fake_price
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, node, node_labels, nodeclaim, nodepool

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
GI = 2**30
SMALL = fake_instance_type("fake-it-0", cpu_cores=1, memory_gib=2, pods=10)
LARGE = fake_instance_type("fake-it-1", cpu_cores=2, memory_gib=4, pods=20)
P_SMALL = fake_price(1, 2 * GI)  # 0.1 + 0.2147483648
P_LARGE = fake_price(2, 4 * GI)
TYPES = {"default": [SMALL, LARGE], "other": [SMALL, LARGE]}

# (node name, pool, instance type, capacity type, zone)
NodeSpec = tuple[str, str, str, str, str]


def cluster(nodes: list[NodeSpec]) -> Cluster:
    c = Cluster()
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    for pool in ("default", "other"):
        c.upsert_nodepool(nodepool(pool))
    for name, pool, it, ct, zone in nodes:
        labels = node_labels(pool, it, zone=zone, capacity_type=ct)
        c.upsert_node(node(name, labels=labels))
        c.upsert_nodeclaim(nodeclaim(f"nc-{name}", pool=pool, node_name=name))
    return c


@pytest.mark.parametrize(
    ("nodes", "want_nodes", "want_pools"),
    [
        pytest.param([], {}, {}, id="no nodes"),
        pytest.param(
            [("a", "default", "fake-it-0", "on-demand", "test-zone-1")],
            {("a", "default", "fake-it-0", "on-demand", "test-zone-1"): P_SMALL},
            {("default",): P_SMALL},
            id="one on-demand node",
        ),
        pytest.param(
            [
                ("a", "default", "fake-it-0", "on-demand", "test-zone-1"),
                ("b", "default", "fake-it-1", "spot", "test-zone-2"),
                ("c", "other", "fake-it-1", "on-demand", "test-zone-3"),
            ],
            {
                ("a", "default", "fake-it-0", "on-demand", "test-zone-1"): P_SMALL,
                ("b", "default", "fake-it-1", "spot", "test-zone-2"): P_LARGE,
                ("c", "other", "fake-it-1", "on-demand", "test-zone-3"): P_LARGE,
            },
            {("default",): P_SMALL + P_LARGE, ("other",): P_LARGE},
            id="two pools summed separately",
        ),
        pytest.param(
            [
                ("a", "default", "fake-it-0", "spot", "test-zone-3"),
                ("b", "default", "fake-it-9", "on-demand", "test-zone-1"),
            ],
            {
                ("a", "default", "fake-it-0", "spot", "test-zone-3"): 0.0,
                ("b", "default", "fake-it-9", "on-demand", "test-zone-1"): 0.0,
            },
            {("default",): 0.0},
            id="no offering prices it: 0 (no spot in zone 3, type not in the pool)",
        ),
    ],
)
def test_node_and_nodepool_prices(
    nodes: list[NodeSpec],
    want_nodes: dict[tuple[str, ...], float],
    want_pools: dict[tuple[str, ...], float],
) -> None:
    got = node_prices(cluster(nodes).snapshot(NOW), TYPES)
    assert got == want_nodes
    assert nodepool_prices(got) == want_pools


def test_nodeclaims_without_a_node_are_not_priced() -> None:
    c = cluster([])
    c.upsert_nodeclaim(nodeclaim("nc-launching", pool="default"))
    assert node_prices(c.snapshot(NOW), TYPES) == {}


def _cheaper(it: InstanceType, price: float) -> InstanceType:
    return replace(it, offerings=tuple(replace(o, price=price) for o in it.offerings))


@pytest.mark.parametrize(
    ("types", "want"),
    [
        pytest.param({}, {}, id="no pools"),
        pytest.param(
            {"default": [SMALL]},
            {
                ("fake-it-0", "spot", "test-zone-1"): P_SMALL,
                ("fake-it-0", "spot", "test-zone-2"): P_SMALL,
                ("fake-it-0", "on-demand", "test-zone-1"): P_SMALL,
                ("fake-it-0", "on-demand", "test-zone-2"): P_SMALL,
                ("fake-it-0", "on-demand", "test-zone-3"): P_SMALL,
            },
            id="every offering of every type",
        ),
        pytest.param(
            {"default": [SMALL], "other": [_cheaper(SMALL, 0.05)]},
            {
                ("fake-it-0", "spot", "test-zone-1"): 0.05,
                ("fake-it-0", "spot", "test-zone-2"): 0.05,
                ("fake-it-0", "on-demand", "test-zone-1"): 0.05,
                ("fake-it-0", "on-demand", "test-zone-2"): 0.05,
                ("fake-it-0", "on-demand", "test-zone-3"): 0.05,
            },
            id="pools pricing one offering differently: the lowest",
        ),
        pytest.param(
            {"default": [_cheaper(SMALL, float("inf"))]}, {}, id="unpriceable offerings skipped"
        ),
    ],
)
def test_offering_prices(
    types: dict[str, list[InstanceType]], want: dict[tuple[str, ...], float]
) -> None:
    assert offering_prices(types) == want


def _samples(m: Metrics, name: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for family in m.registry.collect():
        for s in family.samples:
            if s.name == name:
                out[tuple(s.labels.values())] = s.value
    return out


def test_series_of_nodes_and_pools_that_went_are_removed() -> None:
    m = Metrics()
    cost = CostMetrics(m)
    before = cluster(
        [
            ("a", "default", "fake-it-0", "on-demand", "test-zone-1"),
            ("b", "other", "fake-it-1", "on-demand", "test-zone-1"),
        ]
    )
    cost.prices(before.snapshot(NOW), {"default": [SMALL], "other": [LARGE]})
    after = cluster([("a", "default", "fake-it-0", "on-demand", "test-zone-1")])
    cost.prices(after.snapshot(NOW), {"default": [SMALL]})
    assert _samples(m, "karpenter_nodes_hourly_price") == {
        ("a", "default", "fake-it-0", "on-demand", "test-zone-1"): P_SMALL
    }
    assert _samples(m, "karpenter_nodepools_hourly_price") == {("default",): P_SMALL}
    assert len(_samples(m, "karpenter_cloudprovider_instance_type_offering_price_estimate")) == 5


@pytest.mark.parametrize(
    ("savings", "want"),
    [
        pytest.param({}, {("budget",): 0.0, ("validation",): 0.0, ("start_failed",): 0.0}),
        pytest.param(
            {"budget": 0.25, "validation": 1.5},
            {("budget",): 0.25, ("validation",): 1.5, ("start_failed",): 0.0},
        ),
    ],
)
def test_blocked_savings_name_every_reason(
    savings: dict[str, float], want: dict[tuple[str, ...], float]
) -> None:
    m = Metrics()
    CostMetrics(m).blocked(savings)
    assert _samples(m, "karpenter_voluntary_disruption_blocked_savings_hourly") == want
