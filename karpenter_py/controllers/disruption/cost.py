"""Cost as metrics: what the cluster costs and what the disruption pass could not save.

Every price here comes from the facts a disruption pass decides with (its snapshot and each
NodePool's instance types), through :func:`~karpenter_py.controllers.disruption.candidates.
hourly_price`: the gauges show the numbers consolidation compares, with no second price lookup.

* ``karpenter_cloudprovider_instance_type_offering_price_estimate`` (upstream's AWS name) per
  offering of the instance types the NodePools may launch;
* ``karpenter_nodes_hourly_price`` per managed node and ``karpenter_nodepools_hourly_price`` per
  NodePool; series of nodes (and pools) that went are removed;
* ``karpenter_voluntary_disruption_blocked_savings_hourly{reason}``, one series per
  :data:`BLOCKED_REASONS` entry, 0 when that reason blocked nothing in the last pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from karpenter_py.controllers.disruption.candidates import hourly_price
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.snapshot import Snapshot

# Why a saving the pass found was not taken. Bounded on purpose (a label): the budget kept empty
# nodes (Decision.budget_blocked), the command was rejected at re-validation, or the queue could
# not start it (taint or replacement create failed).
BUDGET: Final = "budget"
VALIDATION: Final = "validation"
START_FAILED: Final = "start_failed"
BLOCKED_REASONS: Final[tuple[str, ...]] = (BUDGET, VALIDATION, START_FAILED)

Labels = tuple[str, ...]


def offering_prices(instance_types: Mapping[str, Sequence[InstanceType]]) -> dict[Labels, float]:
    """(instance_type, capacity_type, zone) -> hourly price, over every NodePool's types; the
    lowest where pools (overlays) or reservations price one offering differently."""
    out: dict[Labels, float] = {}
    for types in instance_types.values():
        for it in types:
            for o in it.offerings:
                if not math.isfinite(o.price):
                    continue
                key = (it.name, o.capacity_type, o.zone)
                out[key] = min(o.price, out.get(key, o.price))
    return out


def node_prices(
    snapshot: Snapshot, instance_types: Mapping[str, Sequence[InstanceType]]
) -> dict[Labels, float]:
    """(node_name, nodepool, instance_type, capacity_type, zone) -> hourly price of each managed
    node that has registered (a NodeClaim still launching has no node name to label)."""
    out: dict[Labels, float] = {}
    for sn in snapshot.nodes:
        if sn.node is None or sn.nodeclaim is None:
            continue
        labels = sn.labels
        key = (
            sn.name,
            sn.node_pool,
            labels.get(LABEL_INSTANCE_TYPE, ""),
            labels.get(LABEL_CAPACITY_TYPE, ""),
            labels.get(LABEL_TOPOLOGY_ZONE, ""),
        )
        out[key] = hourly_price(sn, instance_types)
    return out


def nodepool_prices(nodes: Mapping[Labels, float]) -> dict[Labels, float]:
    """(nodepool,) -> the sum of its nodes' prices, from :func:`node_prices`."""
    out: dict[Labels, float] = {}
    for labels, price in nodes.items():
        key = (labels[1],)
        out[key] = out.get(key, 0.0) + price
    return out


class CostMetrics:
    """Writes the cost gauges; keeps what it wrote last so that stale series are removed."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._offerings: dict[Labels, float] = {}
        self._nodes: dict[Labels, float] = {}
        self._pools: dict[Labels, float] = {}

    def prices(
        self, snapshot: Snapshot, instance_types: Mapping[str, Sequence[InstanceType]]
    ) -> None:
        """Offering, node and NodePool prices from one pass's facts."""
        m = self.metrics
        offerings = offering_prices(instance_types)
        nodes = node_prices(snapshot, instance_types)
        pools = nodepool_prices(nodes)
        m.replace_series(
            m.cloudprovider_instance_type_offering_price_estimate, self._offerings, offerings
        )
        m.replace_series(m.nodes_hourly_price, self._nodes, nodes)
        m.replace_series(m.nodepools_hourly_price, self._pools, pools)
        self._offerings, self._nodes, self._pools = offerings, nodes, pools

    def blocked(self, savings: Mapping[str, float]) -> None:
        """The last pass's blocked savings by reason (:data:`BLOCKED_REASONS`; missing ones 0)."""
        gauge = self.metrics.voluntary_disruption_blocked_savings
        for reason in BLOCKED_REASONS:
            gauge.labels(reason=reason).set(savings.get(reason, 0.0))
