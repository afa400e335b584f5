"""Per-NodePool index of instance types, built once per solve, queried with bitmasks.

Types are numbered in order of their cheapest available offering, and every question the solver
asks ("which types allow zone a?", "which types still fit 3.5 cpu and 9Gi?", "which have an
available spot offering in zone b?") is answered as a Python int bitmask over those numbers. A
candidate NodeClaim then narrows its options with a few big-int ANDs instead of a loop over
hundreds of types, and the cheapest remaining option is the lowest set bit.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from karpenter_py.model.core import HostPort, Pod, Taint
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.hostports import conflict
from karpenter_py.scheduling.inputs import ExistingNode, PoolTemplate
from karpenter_py.scheduling.requirements import (
    WELL_KNOWN,
    Req,
    Requirements,
    compatible,
    intersects,
)
from karpenter_py.scheduling.taints import PREFER_NO_SCHEDULE_TOLERATION, is_ephemeral, untolerated
from karpenter_py.scheduling.topology import Placed, PlacedGroup

_NEGATIVE = frozenset({"NotIn", "DoesNotExist"})


def iter_bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


@dataclass(frozen=True, slots=True)
class OfferingClass:
    """Offerings that look the same to requirements: same zone, capacity type and extra labels."""

    zone: str
    capacity_type: str
    labels: tuple[tuple[str, str], ...]

    def allowed_by(self, reqs: Mapping[str, Req]) -> bool:
        zone = reqs.get(LABEL_TOPOLOGY_ZONE)
        if zone is not None and not zone.has(self.zone):
            return False
        ct = reqs.get(LABEL_CAPACITY_TYPE)
        if ct is not None and not ct.has(self.capacity_type):
            return False
        for key, value in self.labels:
            req = reqs.get(key)
            if req is not None and not req.has(value):
                return False
        return True


def pool_requirements(pool: PoolTemplate) -> Requirements:
    """NodePool requirements, template labels as In requirements, and the labels every NodeClaim
    of the pool gets: ``karpenter.sh/nodepool`` and the NodeClass label (upstream's
    ``NodeClassLabelKey``: ``<group>/<lowercased kind>`` = name, e.g. karpenter.k8s.aws/ec2nodeclass)."""
    reqs = Requirements.from_selectors(pool.requirements) & Requirements.from_labels(pool.labels)
    group, kind, name = pool.node_class_ref
    if group and kind and name:
        reqs = reqs.with_req(Req.in_(f"{group}/{kind.lower()}", (name,)))
    return reqs.with_req(Req.in_(LABEL_NODEPOOL, (pool.name,)))


def type_requirements(it: InstanceType, offerings: Sequence[Offering]) -> Requirements:
    reqs: dict[str, Req] = {k: Req.in_(k, v) for k, v in it.requirements.items()}
    reqs[LABEL_TOPOLOGY_ZONE] = Req.in_(LABEL_TOPOLOGY_ZONE, {o.zone for o in offerings})
    reqs[LABEL_CAPACITY_TYPE] = Req.in_(LABEL_CAPACITY_TYPE, {o.capacity_type for o in offerings})
    return Requirements(reqs)


class PoolIndex:
    """Everything the solver needs to know about one NodePool's instance types."""

    def __init__(
        self, pool: PoolTemplate, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod]
    ) -> None:
        self.pool = pool
        self.requirements = pool_requirements(pool)
        self.taints: tuple[Taint, ...] = pool.taints
        self.daemonsets = daemonsets
        self.rejected: dict[str, str] = {}  # type name -> why the pool cannot use it
        self._build_types(instance_types)
        self.all = (1 << len(self.types)) - 1
        self._build_label_masks()
        self._build_offering_masks()
        self._build_daemon_overhead()
        self._build_fit_index()
        self._req_cache: dict[Req, int] = {}
        self._capacity_index: dict[str, tuple[list[int], list[int]]] = {}
        self._offer_cache: dict[tuple[Req | None, ...], int] = {}
        self._classes_cache: dict[tuple[Req | None, ...], list[OfferingClass]] = {}
        # The packing step's memo of each resource's cheapest rate (price per unit left).
        self.rate_cache: dict[str, float] = {}
        # The packing step's memo of undominated types per (offerings, types, resources) key.
        self.frontier_cache: dict[tuple[object, ...], tuple[tuple[float, int], ...]] = {}
        self._offers_cache: dict[
            tuple[Req | None, ...], tuple[tuple[float, str, int, Offering], ...]
        ] = {}
        self.offering_keys = sorted({k for c in self.class_masks for k, _ in c.labels})

    # ------------------------------------------------------------------ construction
    def _build_types(self, instance_types: Sequence[InstanceType]) -> None:
        entries = []
        for it in instance_types:
            offerings = [
                o for o in it.offerings if o.available and _offering_allowed(o, self.requirements)
            ]
            if not offerings:
                self.rejected[it.name] = (
                    "no available offering matches the nodepool's zone/capacity-type requirements"
                )
                continue
            treqs = type_requirements(it, offerings)
            why = intersects(treqs, self.requirements)
            if why is not None:
                self.rejected[it.name] = why
                continue
            entries.append((min(o.price for o in offerings), it.name, it, tuple(offerings), treqs))
        entries.sort(key=lambda e: (e[0], e[1]))
        self.types: list[InstanceType] = [e[2] for e in entries]
        self.offerings: list[tuple[Offering, ...]] = [e[3] for e in entries]
        self.type_reqs: list[Requirements] = [e[4] for e in entries]

    def _build_label_masks(self) -> None:
        self.value_masks: dict[str, dict[str, int]] = {}
        self.defined: dict[str, int] = {}
        for i, treqs in enumerate(self.type_reqs):
            bit = 1 << i
            for key, req in treqs.items():
                self.defined[key] = self.defined.get(key, 0) | bit
                per_value = self.value_masks.setdefault(key, {})
                for value in req.values:
                    per_value[value] = per_value.get(value, 0) | bit

    def _build_offering_masks(self) -> None:
        self.class_masks: dict[OfferingClass, int] = {}
        self.class_prices: dict[OfferingClass, dict[int, Offering]] = {}
        for i, offerings in enumerate(self.offerings):
            for o in offerings:
                cls = OfferingClass(o.zone, o.capacity_type, tuple(sorted(o.labels.items())))
                self.class_masks[cls] = self.class_masks.get(cls, 0) | (1 << i)
                prices = self.class_prices.setdefault(cls, {})
                best = prices.get(i)
                if best is None or o.price < best.price:
                    prices[i] = o

    def _build_daemon_overhead(self) -> None:
        """Requests and host ports of the DaemonSets that would run on each type's nodes."""
        self.daemon_requests: list[dict[str, int]] = [{} for _ in self.types]
        self.daemon_ports: list[tuple[HostPort, ...]] = [() for _ in self.types]
        for ds in self.daemonsets:
            tolerations = (*ds.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
            if untolerated(self.taints, tolerations) is not None:
                continue
            terms = daemon_requirement_terms(ds)
            for i, treqs in enumerate(self.type_reqs):
                node_reqs = treqs & self.requirements
                if not any(
                    compatible(node_reqs, t, allow_undefined=WELL_KNOWN) is None for t in terms
                ):
                    continue
                acc = self.daemon_requests[i]
                for name, amount in ds.requests.items():
                    acc[name] = acc.get(name, 0) + amount
                if ds.host_ports:
                    self.daemon_ports[i] = self.daemon_ports[i] + ds.host_ports
        # The distinct overheads, each with the types that carry it.
        groups: dict[tuple[tuple[str, int], ...], tuple[dict[str, int], int]] = {}
        for i, acc in enumerate(self.daemon_requests):
            key = tuple(sorted(acc.items()))
            held = groups.get(key)
            groups[key] = (acc, 1 << i) if held is None else (held[0], held[1] | (1 << i))
        self.daemon_groups: list[tuple[dict[str, int], int]] = list(groups.values())
        # Each daemonset host port with the types whose nodes would run it, for ports_mask().
        port_masks: dict[HostPort, int] = {}
        for i, ports in enumerate(self.daemon_ports):
            for port in ports:
                port_masks[port] = port_masks.get(port, 0) | (1 << i)
        self.daemon_port_masks: list[tuple[HostPort, int]] = list(port_masks.items())

    def _build_fit_index(self) -> None:
        """Per resource: types sorted by what is left after daemonsets, with suffix masks."""
        names: set[str] = set()
        for it in self.types:
            names.update(it.allocatable)
        self.effective: list[dict[str, int]] = []
        for i, it in enumerate(self.types):
            overhead = self.daemon_requests[i]
            self.effective.append({n: it.allocatable.get(n, 0) - overhead.get(n, 0) for n in names})
        self.fit_values: dict[str, list[int]] = {}
        self.fit_suffix: dict[str, list[int]] = {}
        for name in names:
            pairs = sorted((self.effective[i][name], i) for i in range(len(self.types)))
            order = [i for _, i in pairs]
            values = [v for v, _ in pairs]
            suffix = [0] * (len(order) + 1)
            for pos in range(len(order) - 1, -1, -1):
                suffix[pos] = suffix[pos + 1] | (1 << order[pos])
            self.fit_values[name] = values
            self.fit_suffix[name] = suffix

    # ------------------------------------------------------------------ queries
    def fit_mask(self, requests: Mapping[str, int]) -> int:
        """Types whose allocatable, less daemonset overhead, holds ``requests``."""
        mask = self.all
        for name, amount in requests.items():
            if amount <= 0:
                continue
            values = self.fit_values.get(name)
            if values is None:
                return 0
            mask &= self.fit_suffix[name][bisect_left(values, amount)]
            if not mask:
                return 0
        return mask

    def req_mask(self, req: Req) -> int:
        """Types whose labels intersect ``req`` (types without the label are not constrained by it)."""
        cached = self._req_cache.get(req)
        if cached is not None:
            return cached
        per_value = self.value_masks.get(req.key)
        if per_value is None:
            mask = self.all  # no type has an opinion on this key
        else:
            # A type without the label will not give its nodes that label: DoesNotExist, which
            # only the negative operators accept.
            mask = self.all & ~self.defined[req.key] if req.operator() in _NEGATIVE else 0
            if req.complement:
                for value, vmask in per_value.items():
                    if req.has(value):
                        mask |= vmask
            else:
                for value in req.values:
                    mask |= per_value.get(value, 0)
        self._req_cache[req] = mask
        return mask

    def ports_mask(self, wanted: Sequence[HostPort]) -> tuple[int, HostPort | None]:
        """Types whose daemonsets leave ``wanted`` host ports free, and a port that is not."""
        mask, clash = self.all, None
        for port, types in self.daemon_port_masks:
            hit = conflict((port,), wanted)
            if hit is not None:
                mask &= ~types
                clash = hit
        return mask, clash

    def reqs_mask(self, reqs: Mapping[str, Req]) -> int:
        mask = self.all
        for req in reqs.values():
            mask &= self.req_mask(req)
        return mask

    def offering_mask(self, reqs: Mapping[str, Req]) -> int:
        """Types with at least one available offering the requirements allow."""
        key = self.offer_key(reqs)
        cached = self._offer_cache.get(key)
        if cached is not None:
            return cached
        mask = 0
        for cls, cmask in self.class_masks.items():
            if cls.allowed_by(reqs):
                mask |= cmask
        self._offer_cache[key] = mask
        return mask

    def limits_mask(self, remaining: Mapping[str, int]) -> int:
        """Types whose capacity fits in what the NodePool's limits still allow."""
        if all(
            self.max_capacity(name, self.all) <= left
            for name, left in remaining.items()
            if name != "nodes"
        ):
            return self.all if remaining.get("nodes", 1) >= 1 else 0
        mask = 0
        for i, it in enumerate(self.types):
            if all(
                (1 if name == "nodes" else it.capacity.get(name, 0)) <= left
                for name, left in remaining.items()
            ):
                mask |= 1 << i
        return mask

    def allowed_classes(self, reqs: Mapping[str, Req]) -> list[OfferingClass]:
        """The offering classes ``reqs`` allows (memoised like ``offering_mask``)."""
        key = self.offer_key(reqs)
        cached = self._classes_cache.get(key)
        if cached is None:
            cached = [cls for cls in self.class_prices if cls.allowed_by(reqs)]
            self._classes_cache[key] = cached
        return cached

    def offer_key(self, reqs: Mapping[str, Req]) -> tuple[Req | None, ...]:
        """What of ``reqs`` decides which offerings are allowed."""
        return (
            reqs.get(LABEL_TOPOLOGY_ZONE),
            reqs.get(LABEL_CAPACITY_TYPE),
            *(reqs.get(k) for k in self.offering_keys),
        )

    def offers(self, reqs: Mapping[str, Req]) -> tuple[tuple[float, str, int, Offering], ...]:
        """(price, name, index, offering) of every type at its cheapest offering ``reqs``
        allows, cheapest first (memoised like ``offering_mask``): a round prices every claim
        it makes, and the packing step many candidate nodes."""
        key = self.offer_key(reqs)
        cached = self._offers_cache.get(key)
        if cached is None:
            best: dict[int, Offering] = {}
            for cls in self.allowed_classes(reqs):
                for i, o in self.class_prices[cls].items():
                    held = best.get(i)
                    if held is None or o.price < held.price:
                        best[i] = o
            cached = tuple(sorted(((o.price, self.types[i].name, i, o) for i, o in best.items())))
            self._offers_cache[key] = cached
        return cached

    def cheapest_price(self, mask: int, reqs: Mapping[str, Req]) -> float | None:
        """The lowest price among the types in ``mask`` at offerings ``reqs`` allows."""
        for price, _, i, _ in self.offers(reqs):
            if mask >> i & 1:
                return price
        return None

    def cheapest_offerings(
        self, mask: int, reqs: Mapping[str, Req]
    ) -> list[tuple[float, str, int, Offering]]:
        """(price, name, index, offering) of each type in ``mask`` at its cheapest allowed
        offering, cheapest first (by price, then name)."""
        return [o for o in self.offers(reqs) if mask >> o[2] & 1]

    def capacity_types(self, mask: int, reqs: Mapping[str, Req]) -> list[str]:
        """Capacity types of the available offerings ``reqs`` allows on the types in ``mask``."""
        masks = self.class_masks
        return sorted(
            {cls.capacity_type for cls in self.allowed_classes(reqs) if masks[cls] & mask}
        )

    def max_capacity(self, name: str, mask: int) -> int:
        """The largest capacity of ``name`` among the types in ``mask``."""
        index = self._capacity_index.get(name)
        if index is None:
            values = sorted((it.capacity.get(name, 0), i) for i, it in enumerate(self.types))
            suffix = [0] * (len(values) + 1)
            for pos in range(len(values) - 1, -1, -1):
                suffix[pos] = suffix[pos + 1] | (1 << values[pos][1])
            index = ([v for v, _ in values], suffix)
            self._capacity_index[name] = index
        return _max_in(index[0], index[1], mask)

    def headroom(self, mask: int, used: Mapping[str, int]) -> dict[str, int]:
        """Per resource, the most any type in ``mask`` could still hold beyond ``used``."""
        return {
            name: _max_in(values, self.fit_suffix[name], mask) - used.get(name, 0)
            for name, values in self.fit_values.items()
        }

    def distinct_values(self, key: str, req: Req, mask: int) -> int:
        """How many values of ``key`` (allowed by ``req``) the types in ``mask`` offer."""
        return sum(1 for v, m in self.value_masks.get(key, {}).items() if m & mask and req.has(v))

    def largest(self, name: str) -> int:
        values = self.fit_values.get(name)
        return values[-1] if values else 0

    def count_at_least(self, name: str, amount: int) -> int:
        values = self.fit_values.get(name, [])
        return len(values) - bisect_right(values, amount - 1)


def _max_in(values: list[int], suffix: list[int], mask: int) -> int:
    """Largest value whose type is in ``mask``; values ascending, suffix[i] = types at i or later."""
    lo, hi = 0, len(values)
    while lo < hi:  # the last position whose suffix still meets the mask
        mid = (lo + hi) // 2
        if suffix[mid] & mask:
            lo = mid + 1
        else:
            hi = mid
    return values[lo - 1] if lo else 0


def _offering_allowed(o: Offering, reqs: Mapping[str, Req]) -> bool:
    return OfferingClass(o.zone, o.capacity_type, tuple(sorted(o.labels.items()))).allowed_by(reqs)


def daemon_requirement_terms(ds: Pod) -> list[Requirements]:
    """A DaemonSet pod's node requirements, one alternative per required term (any may match).

    Nodes Karpenter launches will carry registered/initialized labels, so selectors on them match.
    """
    base = Requirements.from_labels(
        {
            k: v
            for k, v in ds.node_selector.items()
            if k not in (LABEL_NODE_REGISTERED, LABEL_NODE_INITIALIZED)
        }
    )
    terms = [
        base
        & Requirements.from_selectors(
            r
            for r in t.match_expressions
            if r.key not in (LABEL_NODE_REGISTERED, LABEL_NODE_INITIALIZED)
        )
        for t in ds.required_node_terms
    ]
    return terms or [base]


def _pool_key(pool: PoolTemplate) -> tuple[object, ...]:
    """Everything of a pool that a PoolIndex reads (limits and usage are the solver's business)."""
    return (
        pool.name,
        tuple(sorted(pool.labels.items())),
        tuple(sorted(pool.annotations.items())),
        pool.requirements,
        pool.taints,
        pool.startup_taints,
        pool.node_class_ref,
    )


def _same_items(a: Sequence[Pod], b: Sequence[Pod]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class IndexCache:
    """PoolIndexes kept across solves: building one is almost all of a small solve's cost (1,340
    AWS types take hundreds of ms), and a consolidation pass runs hundreds of solves.

    An index is reused while its pool's template is equal and the instance-type list and the
    DaemonSet templates are the *same objects* as when it was built; callers (the launcher's
    round, the offline planner) hand the same list back while nothing changed, so a changed
    catalog, an insufficient-capacity mark or a new DaemonSet builds a fresh index. The cache
    holds strong references to what it was keyed on, so identity cannot be recycled. It is a
    plain memo (no I/O); its entries are never mutated in a way a solve could observe."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        # An OrderedDict so eviction is one C-level popitem: provisioning and disruption solve in
        # worker threads and may share the cache (each step is atomic under the GIL).
        self._entries: OrderedDict[
            tuple[object, ...], tuple[Sequence[InstanceType], Sequence[Pod], PoolIndex]
        ] = OrderedDict()
        self.hits = 0
        self.misses = 0
        # id(labels) -> (labels, their requirements): existing nodes' labels keep their identity
        # across the simulations of a disruption pass, and parsing them was half of each solve.
        self._labels: dict[int, tuple[Mapping[str, str], Requirements]] = {}
        # id(ExistingNode) -> (node, what a solve derives from it): the same objects serve every
        # simulation of a disruption pass.
        self._existing: dict[int, tuple[ExistingNode, SlotParts]] = {}

    def node_requirements(self, labels: Mapping[str, str]) -> Requirements:
        """``Requirements.from_labels(labels)``, memoised by the mapping's identity."""
        held = self._labels.get(id(labels))
        if held is not None and held[0] is labels:
            return held[1]
        reqs = Requirements.from_labels(labels)
        if len(self._labels) >= 20_000:
            self._labels.clear()
        self._labels[id(labels)] = (labels, reqs)
        return reqs

    def existing_parts(self, ex: ExistingNode) -> SlotParts:
        """``existing_slot_parts(ex)``, memoised by the node's identity."""
        held = self._existing.get(id(ex))
        if held is not None and held[0] is ex:
            return held[1]
        parts = existing_slot_parts(ex, self.node_requirements)
        if len(self._existing) >= 20_000:
            self._existing.clear()
        self._existing[id(ex)] = (ex, parts)
        return parts

    def get(
        self, pool: PoolTemplate, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod]
    ) -> PoolIndex:
        key = _pool_key(pool)
        held = self._entries.get(key)
        if held is not None and held[0] is instance_types and _same_items(held[1], daemonsets):
            self.hits += 1
            return held[2]
        self.misses += 1
        index = PoolIndex(pool, instance_types, daemonsets)
        self._entries.pop(key, None)
        self._entries[key] = (instance_types, tuple(daemonsets), index)
        while len(self._entries) > self.size:
            try:
                self._entries.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break
        return index


TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class SlotParts:
    """What a solve derives from an existing node before placing anything: its requirements,
    the taints that count, the room left after its pods, their host ports, and the pods as
    topology sees them. Read-only: a solve copies ``remaining`` and ``ports``."""

    requirements: Requirements
    taints: tuple[Taint, ...]
    remaining: Mapping[str, int]
    ports: tuple[HostPort, ...]
    placed: PlacedGroup


def existing_slot_parts(
    ex: ExistingNode,
    node_requirements: Callable[[Mapping[str, str]], Requirements] = Requirements.from_labels,
) -> SlotParts:
    node = ex.node
    labels = node.labels
    if LABEL_HOSTNAME not in labels:
        labels = {**labels, LABEL_HOSTNAME: node.name}
    reqs = node_requirements(labels)
    taints = node.taints
    if node.unschedulable and not any(t.key == TAINT_NODE_UNSCHEDULABLE for t in taints):
        # A cordoned node: the node controller taints it so, and kube-scheduler honours it.
        taints = (*taints, Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule"))
    if ex.node_pool and not ex.initialized:
        taints = tuple(t for t in taints if not is_ephemeral(t))
    remaining = dict(node.allocatable)
    ports: list[HostPort] = []
    placed: list[Placed] = []
    for pod in ex.pods:
        if pod.is_terminal():
            continue
        for name, amount in pod.requests.items():
            remaining[name] = remaining.get(name, 0) - amount
        ports.extend(pod.host_ports)
        placed.append(Placed(pod, reqs, taints))
    return SlotParts(reqs, taints, remaining, tuple(ports), PlacedGroup(tuple(placed)))
