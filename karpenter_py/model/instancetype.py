"""Instance types and their offerings: the menu the scheduler orders from.

An ``InstanceType`` is a shape (capacity, overhead, labels it gives a node); each ``Offering`` is a
place and way to buy it (zone, capacity type, price, availability). Requirements are kept as plain
``key -> allowed values`` mappings here; the requirement algebra in ``scheduling`` builds on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE
from karpenter_py.model.quantity import Resources

# InstanceType.overlaid marks: what NodeOverlays changed of a type (scheduling.overlays).
OVERLAID_PRICE: Final = "price"
OVERLAID_CAPACITY: Final = "capacity"

# One offering of one instance type, as the ICE cache and cloud errors name it.
OfferingKey = tuple[str, str, str]  # instance type, zone, capacity type


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool = True
    # Extra single-valued labels this offering gives a node (zone-id, reservation id, ...).
    labels: Mapping[str, str] = field(default_factory=dict)
    # True when the price is an estimate (unknown spot prices), so output can say so.
    price_estimated: bool = False
    reservation_capacity: int = 0

    def label_value(self, key: str) -> str | None:
        if key == LABEL_TOPOLOGY_ZONE:
            return self.zone
        if key == LABEL_CAPACITY_TYPE:
            return self.capacity_type
        return self.labels.get(key)


@dataclass(frozen=True, slots=True)
class Overhead:
    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def total(self) -> Resources:
        out: Resources = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for name, amount in part.items():
                out[name] = out.get(name, 0) + amount
        return out


@dataclass(frozen=True, slots=True, eq=False)
class InstanceType:
    """One launchable shape. Build with ``make_instance_type`` so ``allocatable`` is consistent."""

    name: str
    # key -> allowed values; single-valued for most keys (arch, family, cpu, ...).
    requirements: Mapping[str, frozenset[str]]
    capacity: Mapping[str, int]
    overhead: Overhead
    offerings: tuple[Offering, ...]
    allocatable: Mapping[str, int]
    # What NodeOverlays changed: OVERLAID_PRICE and/or OVERLAID_CAPACITY.
    overlaid: frozenset[str] = frozenset()

    def available_offerings(self) -> tuple[Offering, ...]:
        return tuple(o for o in self.offerings if o.available)

    def cheapest_price(self) -> float:
        prices = [o.price for o in self.offerings if o.available]
        return min(prices) if prices else float("inf")


def make_instance_type(
    *,
    name: str,
    requirements: Mapping[str, frozenset[str] | set[str] | tuple[str, ...] | str],
    capacity: Mapping[str, int],
    offerings: tuple[Offering, ...] | list[Offering],
    overhead: Overhead | None = None,
) -> InstanceType:
    """Allocatable = capacity - (kube-reserved + system-reserved + eviction threshold), floored at 0."""
    ovh = overhead or Overhead()
    reqs: dict[str, frozenset[str]] = {}
    for key, values in requirements.items():
        reqs[key] = frozenset([values]) if isinstance(values, str) else frozenset(values)
    reqs.setdefault(LABEL_INSTANCE_TYPE, frozenset([name]))
    total = ovh.total()
    allocatable = {res: max(0, amount - total.get(res, 0)) for res, amount in capacity.items()}
    # Hugepages are carved out of memory (upstream InstanceType.Allocatable).
    huge = sum(v for k, v in capacity.items() if k.startswith("hugepages-"))
    if huge and "memory" in allocatable:
        allocatable["memory"] = max(0, allocatable["memory"] - huge)
    return InstanceType(
        name=name,
        requirements=reqs,
        capacity=dict(capacity),
        overhead=ovh,
        offerings=tuple(offerings),
        allocatable=allocatable,
    )
