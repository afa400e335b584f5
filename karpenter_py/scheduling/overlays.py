"""NodeOverlays applied to the instance types each NodePool may launch (pure).

Every decision that reads prices or capacity (provisioning, consolidation's what-ifs and prices,
``karpenter-py plan``) takes its instance types through :func:`overlaid_types`, so they all see
the same adjusted menu. The rules are upstream's (pkg/controllers/nodeoverlay):

* Overlays are taken by ``weight`` (unset is 0), highest first; among equal weights the name
  later in the alphabet first.
* An overlay selects, per NodePool, the instance types its requirements are compatible with
  (their labels and offerings' zones and capacity types, the NodePool's name as
  ``karpenter.sh/nodepool`` and its template labels), and of those the offerings it allows.
* Price: the first overlay to reach an offering sets it (``price``) or moves it
  (``priceAdjustment``: an amount, or a percentage of the cloud provider's price), floored at 0.
  Capacity: extended resources from several overlays merge; for one resource the first wins.
* An overlay that reaches an offering (for a price) or a resource (for capacity) already set
  by an overlay of the *same* weight conflicts: it is applied nowhere, and the overlay status
  controller reports it (``ValidationSucceeded=False``, reason ``Conflict``). So is an overlay
  whose requirements fail upstream's run-time checks (reason ``RuntimeValidation``).

Where upstream keeps the resolved overlays in a store a controller refreshes, here they are
resolved from the snapshot each round (memoised while nothing changed), so a new overlay takes
effect on the next decision and ``plan`` reaches the same answer from the same objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from karpenter_py.model.api.common import (
    label_value_problem,
    qualified_name_problem,
    restricted_label_problem,
)
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import SelectorRequirement, normalize_label
from karpenter_py.model.instancetype import OVERLAID_CAPACITY, OVERLAID_PRICE, InstanceType
from karpenter_py.model.labels import LABEL_NODEPOOL
from karpenter_py.model.quantity import parse_resources
from karpenter_py.scheduling.requirements import Req, Requirements, compatible
from karpenter_py.scheduling.typetable import offering_allowed, type_requirements
from karpenter_py.state.snapshot import Snapshot

REASON_CONFLICT: Final = "Conflict"
REASON_RUNTIME_VALIDATION: Final = "RuntimeValidation"
CONFLICT_MESSAGE: Final = "conflict with another overlay"


# ----------------------------------------------------------------------------- arithmetic


def adjusted_price(price: float, change: str) -> float:
    """``price`` after an overlay's ``price`` (no sign: the new price) or ``priceAdjustment``
    (signed amount, or signed percentage of ``price``), never below 0."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        out = price * (1 + float(change[:-1]) / 100)
    else:
        out = price + float(change)
    return max(out, 0.0)


def overlay_weight(overlay: NodeOverlay) -> int:
    return overlay.spec.weight or 0


def by_precedence(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """Highest weight first; equal weights by name, the later in the alphabet first."""
    by_name = sorted(overlays, key=lambda o: o.metadata.name or "", reverse=True)
    return sorted(by_name, key=lambda o: -overlay_weight(o))


def runtime_problem(overlay: NodeOverlay) -> str | None:
    """What upstream's run-time validation finds wrong with the requirements (a key that is not
    a qualified name or in a restricted domain, a value that is not a label value), or None."""
    problems = []
    for req in overlay.spec.requirements:
        key = normalize_label(req.key)
        for problem in (
            qualified_name_problem(key),
            restricted_label_problem(key, allow_nodepool=True),
            *(label_value_problem(v) for v in req.values),
        ):
            if problem is not None:
                problems.append(f"requirements: {problem}")
    return "; ".join(problems) or None


def overlay_requirements(overlay: NodeOverlay) -> Requirements:
    return Requirements.from_selectors(
        SelectorRequirement(normalize_label(r.key), r.operator, tuple(r.values))
        for r in overlay.spec.requirements
    )


# ----------------------------------------------------------------------------- resolution


@dataclass(slots=True)
class _Capacity:
    merged: dict[str, int]
    weight: int  # of the last overlay merged in
    resources: frozenset[str]  # that overlay's resources


@dataclass(slots=True)
class _Updates:
    """One NodePool's instance type: offering index -> (price change, weight of the last
    overlay that reached it), and the merged capacity."""

    prices: dict[int, tuple[str, int]] = field(default_factory=dict)
    capacity: _Capacity | None = None


@dataclass(frozen=True, slots=True)
class OverlayOutcome:
    """The instance types per NodePool with the overlays applied (a pool's own sequence, the
    very object given, when no overlay reached it), and the overlays that were not applied."""

    instance_types: Mapping[str, Sequence[InstanceType]]
    conflicts: frozenset[str] = frozenset()
    invalid: Mapping[str, str] = field(default_factory=dict)  # overlay name -> problem


def _pool_requirements(name: str, nodepool: NodePool | None) -> dict[str, Req]:
    labels = dict(nodepool.spec.template.metadata.labels) if nodepool is not None else {}
    labels[LABEL_NODEPOOL] = name
    return dict(Requirements.from_labels(labels))


def _reached(
    overlay_reqs: Requirements, pool_reqs: Mapping[str, Req], it: InstanceType
) -> list[int]:
    """The offerings of ``it`` the overlay reaches in this pool (none when it does not select
    the type at all)."""
    reqs = Requirements({**type_requirements(it, it.offerings), **pool_reqs})
    if compatible(reqs, overlay_reqs) is not None:
        return []
    return [i for i, o in enumerate(it.offerings) if offering_allowed(o, overlay_reqs)]


def _conflicts(overlay: NodeOverlay, updates: _Updates, offerings: Sequence[int]) -> bool:
    weight = overlay_weight(overlay)
    spec = overlay.spec
    if spec.price is not None or spec.price_adjustment is not None:
        for i in offerings:
            held = updates.prices.get(i)
            if held is not None and held[1] == weight:
                return True
    cap = updates.capacity
    return bool(
        spec.capacity
        and cap is not None
        and cap.weight == weight
        and cap.resources & set(spec.capacity)
    )


def _record(overlay: NodeOverlay, updates: _Updates, offerings: Sequence[int]) -> None:
    weight = overlay_weight(overlay)
    spec = overlay.spec
    change = spec.price if spec.price is not None else spec.price_adjustment
    if change is not None:
        for i in offerings:
            held = updates.prices.get(i)
            # The first (strongest) overlay keeps the price; a weaker one only lowers the
            # weight the next overlay must differ from.
            updates.prices[i] = (held[0] if held is not None else change, weight)
    if spec.capacity:
        amounts = parse_resources(spec.capacity)
        cap = updates.capacity
        if cap is None:
            updates.capacity = _Capacity(amounts, weight, frozenset(amounts))
        else:
            for name, amount in amounts.items():
                cap.merged.setdefault(name, amount)
            cap.weight, cap.resources = weight, frozenset(amounts)


def _applied(it: InstanceType, updates: _Updates) -> InstanceType:
    offerings = tuple(
        replace(o, price=adjusted_price(o.price, updates.prices[i][0]))
        if i in updates.prices
        else o
        for i, o in enumerate(it.offerings)
    )
    marks = {OVERLAID_PRICE} if updates.prices else set()
    if updates.capacity is None:
        return replace(it, offerings=offerings, overlaid=frozenset(marks))
    added = updates.capacity.merged
    reserved = it.overhead.total()
    allocatable = dict(it.allocatable)
    for name, amount in added.items():
        allocatable[name] = max(0, amount - reserved.get(name, 0))
        if name.startswith("hugepages-") and "memory" in allocatable:
            # Hugepages are carved out of memory (make_instance_type does the same).
            grown = amount - it.capacity.get(name, 0)
            allocatable["memory"] = max(0, allocatable["memory"] - grown)
    return replace(
        it,
        offerings=offerings,
        capacity={**it.capacity, **added},
        allocatable=allocatable,
        overlaid=frozenset({*marks, OVERLAID_CAPACITY}),
    )


def _reach(
    overlay: NodeOverlay,
    instance_types: Mapping[str, Sequence[InstanceType]],
    pool_reqs: Mapping[str, Mapping[str, Req]],
    updates: dict[tuple[str, str], _Updates],
) -> list[tuple[_Updates, list[int]]] | None:
    """Where the overlay applies (each pool's instance type and its offerings reached), or None
    when it conflicts with an overlay of the same weight somewhere."""
    reqs = overlay_requirements(overlay)
    reached: list[tuple[_Updates, list[int]]] = []
    for pool, types in instance_types.items():
        for it in types:
            offerings = _reached(reqs, pool_reqs[pool], it)
            if not offerings:
                continue
            held = updates.setdefault((pool, it.name), _Updates())
            if _conflicts(overlay, held, offerings):
                return None
            reached.append((held, offerings))
    return reached


def _adjusted(
    types: Sequence[InstanceType], updates: Sequence[_Updates | None]
) -> Sequence[InstanceType]:
    """``types`` with their updates applied; the very same sequence when there are none."""
    if not any(u is not None and (u.prices or u.capacity) for u in updates):
        return types
    return [
        _applied(it, u) if u is not None and (u.prices or u.capacity) else it
        for it, u in zip(types, updates, strict=True)
    ]


def resolve_overlays(
    overlays: Iterable[NodeOverlay],
    nodepools: Mapping[str, NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
) -> OverlayOutcome:
    """Apply ``overlays`` to each pool's ``instance_types`` (``nodepools`` gives the pools'
    template labels). An overlay is applied whole or not at all."""
    updates: dict[tuple[str, str], _Updates] = {}
    pool_reqs = {name: _pool_requirements(name, nodepools.get(name)) for name in instance_types}
    conflicts: set[str] = set()
    invalid: dict[str, str] = {}
    for overlay in by_precedence(overlays):
        name = overlay.metadata.name or ""
        problem = runtime_problem(overlay)
        if problem is not None:
            invalid[name] = problem
            continue
        reached = _reach(overlay, instance_types, pool_reqs, updates)
        if reached is None:
            conflicts.add(name)
            continue
        for held, offerings in reached:
            _record(overlay, held, offerings)
    out = {
        pool: _adjusted(types, [updates.get((pool, it.name)) for it in types])
        for pool, types in instance_types.items()
    }
    return OverlayOutcome(out, frozenset(conflicts), invalid)


class OverlayMemo:
    """The last resolution, given back while its inputs are the very same objects: the solver's
    index cache is keyed on the identity of each pool's instance-type list, so an unchanged
    round must hand back the same lists."""

    def __init__(self) -> None:
        self._inputs: tuple[tuple[object, ...], ...] | None = None
        self._outcome: OverlayOutcome | None = None

    def resolve(
        self,
        overlays: Mapping[str, NodeOverlay],
        nodepools: Mapping[str, NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
    ) -> OverlayOutcome:
        inputs = (
            tuple(overlays.values()),
            tuple(nodepools.get(name) for name in instance_types),
            tuple(instance_types.values()),
        )
        held = self._inputs
        if (
            held is not None
            and self._outcome is not None
            and all(
                len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
                for a, b in zip(held, inputs, strict=True)
            )
            and tuple(self._outcome.instance_types) == tuple(instance_types)
        ):
            return self._outcome
        self._inputs = inputs
        self._outcome = resolve_overlays(overlays.values(), nodepools, instance_types)
        return self._outcome


def overlaid_types(
    snapshot: Snapshot,
    instance_types: Mapping[str, Sequence[InstanceType]],
    memo: OverlayMemo | None = None,
) -> Mapping[str, Sequence[InstanceType]]:
    """Each pool's instance types with the snapshot's NodeOverlays applied: the one door every
    decision takes its instance types through (the same mapping when there are no overlays)."""
    if not snapshot.overlays:
        return instance_types
    if memo is None:
        return resolve_overlays(
            snapshot.overlays.values(), snapshot.nodepools, instance_types
        ).instance_types
    return memo.resolve(snapshot.overlays, snapshot.nodepools, instance_types).instance_types
