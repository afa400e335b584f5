"""The part of a NodePool's instance-type index that NodePools share.

A pool's index numbers its types by cheapest offering and answers the solver's questions as
bitmasks (see ``instances.PoolIndex``). Almost all of it depends on the catalog, on what picks
offerings (the zone, capacity-type and offering-label requirements), and on which DaemonSets
would run on the types, not on the rest of the pool's requirements, which only narrow which
types it may use. 500 NodePools over one catalog with a handful of zone and capacity-type
choices so share a handful of ``TypeTable``s (the bitmasks, the fit index by resource, the
memos), and each pool keeps the mask of its own types (``filter_mask``), memoised per distinct
requirement set. A table's numbering is the pool's own with the types it rejects left in between,
so the order of a pool's types, and with it every choice the solver makes, is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from karpenter_py.model.core import HostPort, Pod, Taint
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.requirements import (
    WELL_KNOWN,
    Req,
    Requirements,
    compatible,
    intersects,
)
from karpenter_py.scheduling.taints import PREFER_NO_SCHEDULE_TOLERATION, untolerated

_NEGATIVE = frozenset({"NotIn", "DoesNotExist"})


def iter_bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


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


def type_requirements(
    it: InstanceType,
    offerings: Sequence[Offering],
    labels: Mapping[str, Req] | None = None,
) -> Requirements:
    """The type's labels (``labels``: the same, already built) and the zones and capacity
    types of ``offerings`` as requirements."""
    reqs: dict[str, Req] = (
        dict(labels)
        if labels is not None
        else {k: Req.in_(k, v) for k, v in it.requirements.items()}
    )
    reqs[LABEL_TOPOLOGY_ZONE] = Req.in_(LABEL_TOPOLOGY_ZONE, {o.zone for o in offerings})
    reqs[LABEL_CAPACITY_TYPE] = Req.in_(LABEL_CAPACITY_TYPE, {o.capacity_type for o in offerings})
    return Requirements(reqs)


def usable(
    it: InstanceType, requirements: Requirements, labels: Mapping[str, Req] | None = None
) -> tuple[tuple[Offering, ...], Requirements] | str:
    """The offerings of ``it`` that ``requirements`` allow and the type's requirements over
    them, or why ``requirements`` rule the type out."""
    offerings = tuple(o for o in it.offerings if o.available and offering_allowed(o, requirements))
    if not offerings:
        return "no available offering matches the nodepool's zone/capacity-type requirements"
    treqs = type_requirements(it, offerings, labels)
    why = intersects(treqs, requirements)
    return why if why is not None else (offerings, treqs)


def offering_allowed(o: Offering, reqs: Mapping[str, Req]) -> bool:
    return OfferingClass(o.zone, o.capacity_type, tuple(sorted(o.labels.items()))).allowed_by(reqs)


def max_in(values: list[int], suffix: list[int], mask: int) -> int:
    """Largest value whose type is in ``mask``; values ascending, suffix[i] = types at i or later."""
    lo, hi = 0, len(values)
    while lo < hi:  # the last position whose suffix still meets the mask
        mid = (lo + hi) // 2
        if suffix[mid] & mask:
            lo = mid + 1
        else:
            hi = mid
    return values[lo - 1] if lo else 0


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


class TypeTable:
    """Instance types that ``requirements`` allow with an available offering, numbered cheapest
    first, with everything the solver asks of them that does not depend on the rest of a pool.

    ``daemon_requirements`` are the pool's requirements as far as DaemonSets' node selectors
    read them, ``taints`` decide which DaemonSets run at all. Read-only once built, except for
    memos whose answers depend only on the table.
    """

    def __init__(
        self,
        instance_types: Sequence[InstanceType],
        requirements: Requirements,
        *,
        daemon_requirements: Requirements,
        taints: Sequence[Taint],
        daemonsets: Sequence[Pod],
        catalog: CatalogFacts | None = None,
    ) -> None:
        self.rejected: dict[str, str] = {}  # type name -> why the table leaves it out
        self._build_types(instance_types, requirements, catalog)
        self.all = (1 << len(self.types)) - 1
        self._build_label_masks()
        self._build_offering_masks()
        self._build_daemon_overhead(daemon_requirements, taints, daemonsets)
        self._build_fit_index()
        self._req_cache: dict[Req, int] = {}
        self._capacity_index: dict[str, tuple[list[int], list[int]]] = {}
        self._offer_cache: dict[tuple[Req | None, ...], int] = {}
        self._classes_cache: dict[tuple[Req | None, ...], list[OfferingClass]] = {}
        self._offers_cache: dict[
            tuple[Req | None, ...], tuple[tuple[float, str, int, Offering], ...]
        ] = {}
        self._filter_cache: dict[Requirements, int] = {}
        # Per pool mask (pools with equal masks share them): what ``label_values``,
        # ``label_keys`` and ``port_masks`` worked out.
        self._label_values: dict[tuple[int, str], list[str]] = {}
        self._label_keys: dict[int, list[str]] = {}
        self._port_masks: dict[int, list[tuple[HostPort, int]]] = {}
        # The packing step's memo of undominated types per (offerings, types, resources) key:
        # the key holds the mask of types, so pools sharing the table share it.
        self.frontier_cache: dict[tuple[object, ...], tuple[tuple[float, int], ...]] = {}
        self.offering_keys = sorted({k for c in self.class_masks for k, _ in c.labels})

    # ------------------------------------------------------------------ construction
    def _build_types(
        self,
        instance_types: Sequence[InstanceType],
        requirements: Requirements,
        catalog: CatalogFacts | None,
    ) -> None:
        entries = []
        for it in instance_types:
            found = usable(it, requirements, catalog.labels[id(it)] if catalog else None)
            if isinstance(found, str):
                self.rejected[it.name] = found
                continue
            offerings, treqs = found
            entries.append((min(o.price for o in offerings), it.name, it, offerings, treqs))
        entries.sort(key=lambda e: (e[0], e[1]))
        self.types: list[InstanceType] = [e[2] for e in entries]
        self.offerings: list[tuple[Offering, ...]] = [e[3] for e in entries]
        self.type_reqs: list[Requirements] = [e[4] for e in entries]
        self.position = {it.name: i for i, it in enumerate(self.types)}

    def _build_label_masks(self) -> None:
        self.value_masks: dict[str, dict[str, int]] = {}
        self.defined: dict[str, int] = {}
        # Types that define a key with no value at all (DoesNotExist): no value mask holds them.
        self.defined_empty: dict[str, int] = {}
        for i, treqs in enumerate(self.type_reqs):
            bit = 1 << i
            for key, req in treqs.items():
                self.defined[key] = self.defined.get(key, 0) | bit
                per_value = self.value_masks.setdefault(key, {})
                if not req.values:
                    self.defined_empty[key] = self.defined_empty.get(key, 0) | bit
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

    def _build_daemon_overhead(
        self, requirements: Requirements, taints: Sequence[Taint], daemonsets: Sequence[Pod]
    ) -> None:
        """Requests and host ports of the DaemonSets that would run on each type's nodes."""
        self.daemon_requests: list[dict[str, int]] = [{} for _ in self.types]
        self.daemon_ports: list[tuple[HostPort, ...]] = [() for _ in self.types]
        for ds in daemonsets:
            tolerations = (*ds.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
            if untolerated(taints, tolerations) is not None:
                continue
            terms = daemon_requirement_terms(ds)
            for i, treqs in enumerate(self.type_reqs):
                node_reqs = treqs & requirements
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

    def _build_fit_index(self) -> None:
        """Per resource: what types have left after daemonsets, with suffix masks."""
        names: set[str] = set()
        for it in self.types:
            names.update(it.allocatable)
        self.effective: list[dict[str, int]] = []
        # Types whose allocatable holds their daemonsets' requests: on the others no pod fits,
        # whatever it asks for (a pod asking no memory still needs the daemonsets' memory
        # there, e.g. a DaemonSet whose memory limit defaulted its request to 10000Gi).
        self.overhead_fits = 0
        for i, it in enumerate(self.types):
            overhead = self.daemon_requests[i]
            self.effective.append({n: it.allocatable.get(n, 0) - overhead.get(n, 0) for n in names})
            if all(it.allocatable.get(n, 0) >= amount for n, amount in overhead.items()):
                self.overhead_fits |= 1 << i
        self.fit_values: dict[str, list[int]] = {}
        self.fit_suffix: dict[str, list[int]] = {}
        for name in names:
            values, suffix = _suffix_index(e[name] for e in self.effective)
            self.fit_values[name] = values
            self.fit_suffix[name] = suffix

    # ------------------------------------------------------------------ queries
    def filter_mask(self, requirements: Requirements) -> int:
        """The types whose labels intersect ``requirements`` (``intersects``: a type without a
        key is not constrained by it), memoised per requirement set."""
        cached = self._filter_cache.get(requirements)
        if cached is not None:
            return cached
        mask = self.all
        for key, req in requirements.items():
            per_value = self.value_masks.get(key)
            if per_value is None:
                continue  # no type has the key: nothing to intersect with
            allowed = (self.all & ~self.defined[key]) | _with_values(per_value, req)
            if req.operator() in _NEGATIVE:
                # Two negative requirements never conflict (both allow "absent").
                allowed |= self.defined_empty.get(key, 0)
            mask &= allowed
        self._filter_cache[requirements] = mask
        return mask

    def label_values(self, mask: int, key: str) -> list[str]:
        """The values of label ``key`` the types in ``mask`` offer, in the order the types
        (cheapest first) first offer them."""
        held = self._label_values.get((mask, key))
        if held is None:
            values: dict[str, None] = {}
            for i in iter_bits(mask & self.defined.get(key, 0)):
                values.update(dict.fromkeys(self.type_reqs[i][key].values))
            held = self._label_values[(mask, key)] = list(values)
        return held

    def label_keys(self, mask: int) -> list[str]:
        """The label keys the types in ``mask`` define, in the order the types first do."""
        held = self._label_keys.get(mask)
        if held is None:
            keys: dict[str, None] = {}
            for i in iter_bits(mask):
                keys.update(dict.fromkeys(self.type_reqs[i]))
            held = self._label_keys[mask] = list(keys)
        return held

    def port_masks(self, mask: int) -> list[tuple[HostPort, int]]:
        """Each daemonset host port with the types in ``mask`` whose nodes would run it, in
        the order the types (cheapest first) first carry them."""
        held = self._port_masks.get(mask)
        if held is None:
            by_port: dict[HostPort, int] = {}
            for i in iter_bits(mask):
                for port in self.daemon_ports[i]:
                    by_port[port] = by_port.get(port, 0) | (1 << i)
            held = self._port_masks[mask] = list(by_port.items())
        return held

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
            mask |= _with_values(per_value, req)
        self._req_cache[req] = mask
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
        return offer_key(reqs, self.offering_keys)

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
            index = _suffix_index(it.capacity.get(name, 0) for it in self.types)
            self._capacity_index[name] = index
        return max_in(index[0], index[1], mask)

    def distinct_values(self, key: str, req: Req, mask: int) -> int:
        """How many values of ``key`` (allowed by ``req``) the types in ``mask`` offer."""
        return sum(1 for v, m in self.value_masks.get(key, {}).items() if m & mask and req.has(v))


def offer_key(reqs: Mapping[str, Req], offering_keys: Sequence[str]) -> tuple[Req | None, ...]:
    """What of ``reqs`` decides which offerings are allowed: zone, capacity type and the
    offering labels ``offering_keys``."""
    return (
        reqs.get(LABEL_TOPOLOGY_ZONE),
        reqs.get(LABEL_CAPACITY_TYPE),
        *(reqs.get(k) for k in offering_keys),
    )


# What a shared table depends on beyond the catalog and the DaemonSets: the requirements that
# pick offerings, and per DaemonSet whether the pool's taints let it run, with the pool's
# requirements on the keys its node selectors read.
TableKey = tuple[Requirements, tuple[bool, ...], Requirements]


def _suffix_index(amounts: Iterable[int]) -> tuple[list[int], list[int]]:
    """The distinct ``amounts`` (one per type, by type number) ascending, and for each position
    the mask of the types with at least that amount (one past the end: none). One mask per
    distinct amount, not per type: 1,340 types have a few dozen distinct CPU sizes."""
    by_amount: dict[int, int] = {}
    for i, amount in enumerate(amounts):
        by_amount[amount] = by_amount.get(amount, 0) | (1 << i)
    values = sorted(by_amount)
    suffix = [0] * (len(values) + 1)
    for pos in range(len(values) - 1, -1, -1):
        suffix[pos] = suffix[pos + 1] | by_amount[values[pos]]
    return values, suffix


def _with_values(per_value: Mapping[str, int], req: Req) -> int:
    """The types with a value of ``req``'s key that ``req`` allows (``per_value``: value ->
    the types with it)."""
    mask = 0
    if req.complement:
        for value, vmask in per_value.items():
            if req.has(value):
                mask |= vmask
    else:
        for value in req.values:
            mask |= per_value.get(value, 0)
    return mask


@dataclass(frozen=True, slots=True, eq=False)
class CatalogFacts:
    """What every table over one catalog starts from, worked out once per catalog."""

    # The extra labels any available offering carries: requirements on them pick offerings.
    offering_keys: frozenset[str]
    # Labels every type defines with one value (arch, os, family, ...): on a pool's types a
    # DaemonSet sees the type's own value whatever the pool asks of the key.
    fixed_keys: frozenset[str]
    # id(type) -> its labels as requirements, shared by every table (and so by every pool).
    labels: Mapping[int, Mapping[str, Req]]

    @staticmethod
    def of(instance_types: Sequence[InstanceType]) -> CatalogFacts:
        fixed: set[str] | None = None
        for it in instance_types:
            single = {k for k, v in it.requirements.items() if len(v) == 1}
            fixed = single if fixed is None else fixed & single
        return CatalogFacts(
            offering_keys=frozenset(
                k for it in instance_types for o in it.offerings if o.available for k in o.labels
            ),
            fixed_keys=frozenset(fixed or ()),
            labels={
                id(it): {k: Req.in_(k, v) for k, v in it.requirements.items()}
                for it in instance_types
            },
        )


def table_key(
    requirements: Requirements,
    taints: Sequence[Taint],
    daemonsets: Sequence[Pod],
    catalog: CatalogFacts,
) -> TableKey:
    """What of a pool decides its table, given the catalog and the DaemonSets: pools with
    equal keys get equal tables. The first part picks offerings; the last is what DaemonSet
    selectors read of the pool beyond that and beyond the labels every type fixes (on the
    pool's own types those intersect to the type's values, so they change no overhead)."""
    picks = frozenset({LABEL_TOPOLOGY_ZONE, LABEL_CAPACITY_TYPE}) | catalog.offering_keys
    runs = tuple(
        untolerated(taints, (*ds.tolerations, PREFER_NO_SCHEDULE_TOLERATION)) is None
        for ds in daemonsets
    )
    read = {
        k
        for ds, run in zip(daemonsets, runs, strict=True)
        if run
        for t in daemon_requirement_terms(ds)
        for k in t
    }
    return (
        Requirements({k: r for k, r in requirements.items() if k in picks}),
        runs,
        Requirements(
            {
                k: r
                for k, r in requirements.items()
                if k in read and k not in picks and k not in catalog.fixed_keys
            }
        ),
    )
