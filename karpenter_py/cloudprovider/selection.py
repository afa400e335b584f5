"""Which instance types and offerings a NodeClaim may launch on (every provider's first step).

A type qualifies when its labels intersect the NodeClaim's requirements and its allocatable
fits the NodeClaim's requests; an offering when it is available, not marked unavailable by the
caller, and its zone, capacity type and labels are allowed (a NodeClaim the solver planned into
reservations names them: ``karpenter.k8s.aws/capacity-reservation-id In [...]``). Candidates
come back cheapest first (by their cheapest qualifying offering, then name), which is the order
CreateFleet overrides and kwok's pick both want.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.quantity import fits, parse_resources
from karpenter_py.scheduling.requirements import Requirements, intersects
from karpenter_py.scheduling.typetable import offering_allowed, type_requirements

# (instance type, zone, capacity type) -> recently failed with insufficient capacity
Unavailable = Callable[[str, str, str], bool]


class OfferingCache(Protocol):
    """The insufficient-capacity cache a provider reads and feeds (the launcher's
    ``UnavailableOfferings``): offerings are (instance type, zone, capacity type)."""

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool: ...

    def mark_all(self, offerings: Iterable[tuple[str, str, str]]) -> None: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A type the NodeClaim can launch, with only the offerings it may use."""

    instance_type: InstanceType
    offerings: tuple[Offering, ...]

    @property
    def price(self) -> float:
        return min(o.price for o in self.offerings)


def nodeclaim_requirements(nodeclaim: NodeClaim) -> Requirements:
    return Requirements.from_selectors(
        SelectorRequirement(r.key, r.operator, tuple(r.values), r.min_values)
        for r in nodeclaim.spec.requirements
    )


def candidates(
    nodeclaim: NodeClaim,
    instance_types: Sequence[InstanceType],
    unavailable: Unavailable | None = None,
) -> list[Candidate]:
    """The NodeClaim's launchable types, cheapest first; each keeps only usable offerings."""
    reqs = nodeclaim_requirements(nodeclaim)
    requests = parse_resources(nodeclaim.spec.resources.requests)
    out: list[Candidate] = []
    for it in instance_types:
        if intersects(type_requirements(it, it.offerings), reqs) is not None:
            continue
        if not fits(requests, it.allocatable):
            continue
        usable = tuple(
            o
            for o in it.offerings
            if o.available
            and offering_allowed(o, reqs)
            and not (unavailable is not None and unavailable(it.name, o.zone, o.capacity_type))
        )
        if usable:
            out.append(Candidate(it, usable))
    out.sort(key=lambda c: (c.price, c.instance_type.name))
    return out


def with_offerings(c: Candidate) -> InstanceType:
    """The candidate's type carrying only its usable offerings."""
    return replace(c.instance_type, offerings=c.offerings)
