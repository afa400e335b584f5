"""What the solver decides: new NodeClaims, placements on existing nodes, and why pods failed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter_py.model.core import Pod, SelectorRequirement, Taint
from karpenter_py.model.instancetype import InstanceType, Offering


@dataclass(frozen=True, slots=True, eq=False)
class NewNodeClaim:
    node_pool: str
    hostname: str  # placeholder hostname used for hostname topology inside the solve
    instance_types: tuple[InstanceType, ...]  # compatible options, cheapest first (<= 600)
    requirements: tuple[SelectorRequirement, ...]  # final requirements for the NodeClaim spec
    labels: Mapping[str, str]  # labels the launched node carries (single-valued requirements)
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    pods: tuple[Pod, ...]
    requests: Mapping[str, int]  # pods + daemonset overhead
    instance_type: InstanceType  # the cheapest compatible option
    offering: Offering  # its cheapest compatible available offering
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def price(self) -> float:
        return self.offering.price


@dataclass(frozen=True, slots=True)
class ExistingPlacement:
    node_name: str
    pods: tuple[Pod, ...]


@dataclass(frozen=True, slots=True)
class PodError:
    pod: Pod
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    new_node_claims: tuple[NewNodeClaim, ...]
    existing: tuple[ExistingPlacement, ...]
    errors: tuple[PodError, ...]

    @property
    def hourly_cost(self) -> float:
        return sum(nc.price for nc in self.new_node_claims)

    def placed_pods(self) -> int:
        return sum(len(nc.pods) for nc in self.new_node_claims) + sum(
            len(p.pods) for p in self.existing
        )
