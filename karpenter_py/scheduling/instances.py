"""Per-NodePool index of instance types, built once per solve, queried with bitmasks.

Types are numbered in order of their cheapest available offering, and every question the solver
asks ("which types allow zone a?", "which types still fit 3.5 cpu and 9Gi?", "which have an
available spot offering in zone b?") is answered as a Python int bitmask over those numbers. A
candidate NodeClaim then narrows its options with a few big-int ANDs instead of a loop over
hundreds of types, and the cheapest remaining option is the lowest set bit. The numbered types and
their masks live in a ``typetable.TypeTable`` that NodePools over one catalog share (see
``IndexCache``); a pool's index is its mask of the table's types.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import TypeVar

from karpenter_py.model.core import HostPort, Pod, Taint
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import LABEL_NODEPOOL
from karpenter_py.scheduling.existing import ExistingBase, SlotParts, existing_slot_parts
from karpenter_py.scheduling.hostports import conflict
from karpenter_py.scheduling.inputs import ExistingNode, PoolTemplate
from karpenter_py.scheduling.requirements import Req, Requirements
from karpenter_py.scheduling.typetable import (
    CatalogFacts,
    OfferingClass,
    TableKey,
    TypeTable,
    iter_bits,
    max_in,
    table_key,
    usable,
)


def lowest_bit(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def pool_requirements(pool: PoolTemplate) -> Requirements:
    """NodePool requirements, template labels as In requirements, and the labels every NodeClaim
    of the pool gets: ``karpenter.sh/nodepool`` and the NodeClass label (upstream's
    ``NodeClassLabelKey``: ``<group>/<lowercased kind>`` = name, e.g. karpenter.k8s.aws/ec2nodeclass)."""
    reqs = Requirements.from_selectors(pool.requirements) & Requirements.from_labels(pool.labels)
    group, kind, name = pool.node_class_ref
    if group and kind and name:
        reqs = reqs.with_req(Req.in_(f"{group}/{kind.lower()}", (name,)))
    return reqs.with_req(Req.in_(LABEL_NODEPOOL, (pool.name,)))


class PoolIndex:
    """Everything the solver needs to know about one NodePool's instance types.

    The types, their bitmasks and the fit index live in a ``TypeTable``, which pools that agree
    on what picks offerings and DaemonSets share (``IndexCache``); the pool keeps ``all``, the
    mask of the table's types its requirements allow, and answers every question within it.
    Built alone (``table`` None) the table holds exactly the pool's types.
    """

    def __init__(
        self,
        pool: PoolTemplate,
        instance_types: Sequence[InstanceType],
        daemonsets: Sequence[Pod],
        table: TypeTable | None = None,
    ) -> None:
        self.pool = pool
        self.requirements = pool_requirements(pool)
        self.taints: tuple[Taint, ...] = pool.taints
        self.daemonsets = daemonsets
        self._instance_types = instance_types
        if table is None:
            table = TypeTable(
                instance_types,
                self.requirements,
                daemon_requirements=self.requirements,
                taints=pool.taints,
                daemonsets=daemonsets,
            )
            self.all = table.all
        else:
            self.all = table.filter_mask(
                Requirements({k: r for k, r in self.requirements.items() if k in table.defined})
            )
        self.table = table
        # The table's, indexed by type number (only the numbers in ``all`` are this pool's).
        self.types = table.types
        self.offerings = table.offerings
        self.type_reqs = table.type_reqs
        self.effective = table.effective
        self.daemon_requests = table.daemon_requests
        self.daemon_ports = table.daemon_ports
        self.daemon_groups = table.daemon_groups
        self.fit_values = table.fit_values
        self.fit_suffix = table.fit_suffix
        self.overhead_fits = table.overhead_fits
        self.offering_keys = table.offering_keys
        self.frontier_cache = table.frontier_cache
        # The packing step's memo of each resource's cheapest rate (price per unit left).
        self.rate_cache: dict[str, float] = {}
        self._rejected: dict[str, str] | None = None

    # ------------------------------------------------------------------ the pool's part
    @property
    def rejected(self) -> dict[str, str]:
        """Type name -> why the pool cannot use it (worked out when a diagnosis asks)."""
        if self._rejected is None:
            self._rejected = {
                it.name: found
                for it in self._instance_types
                if isinstance(found := usable(it, self.requirements), str)
            }
        return self._rejected

    @property
    def daemon_port_masks(self) -> list[tuple[HostPort, int]]:
        """Each daemonset host port with the pool's types whose nodes would run it, in the
        order the pool's types (cheapest first) first carry them."""
        return self.table.port_masks(self.all)

    def label_values(self, key: str) -> list[str]:
        """The values of label ``key`` the pool's types offer, in the order the pool's types
        (cheapest first) first offer them."""
        return self.table.label_values(self.all, key)

    def label_keys(self) -> list[str]:
        """The label keys the pool's types define, in the order the pool's types first do."""
        return self.table.label_keys(self.all)

    # ------------------------------------------------------------------ queries
    def fit_mask(self, requests: Mapping[str, int]) -> int:
        """Types whose allocatable, less daemonset overhead, holds ``requests`` (never a type
        whose daemonsets alone exceed its allocatable)."""
        mask = self.all & self.overhead_fits
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
        return self.table.req_mask(req) & self.all

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
            mask &= self.table.req_mask(req)
        return mask

    def offering_mask(self, reqs: Mapping[str, Req]) -> int:
        """Types with at least one available offering the requirements allow."""
        return self.table.offering_mask(reqs) & self.all

    def limits_mask(self, remaining: Mapping[str, int]) -> int:
        """Types whose capacity fits in what the NodePool's limits still allow."""
        if all(
            self.max_capacity(name, self.all) <= left
            for name, left in remaining.items()
            if name != "nodes"
        ):
            return self.all if remaining.get("nodes", 1) >= 1 else 0
        mask = 0
        for i in iter_bits(self.all):
            it = self.types[i]
            if all(
                (1 if name == "nodes" else it.capacity.get(name, 0)) <= left
                for name, left in remaining.items()
            ):
                mask |= 1 << i
        return mask

    def allowed_classes(self, reqs: Mapping[str, Req]) -> list[OfferingClass]:
        """The offering classes ``reqs`` allows."""
        return self.table.allowed_classes(reqs)

    def offer_key(self, reqs: Mapping[str, Req]) -> tuple[Req | None, ...]:
        """What of ``reqs`` decides which offerings are allowed."""
        return self.table.offer_key(reqs)

    def offers(self, reqs: Mapping[str, Req]) -> tuple[tuple[float, str, int, Offering], ...]:
        """(price, name, index, offering) of every pool type at its cheapest offering ``reqs``
        allows, cheapest first."""
        offers = self.table.offers(reqs)
        if self.all == self.table.all:
            return offers
        return tuple(o for o in offers if self.all >> o[2] & 1)

    def cheapest_price(self, mask: int, reqs: Mapping[str, Req]) -> float | None:
        """The lowest price among the types in ``mask`` at offerings ``reqs`` allows."""
        mask &= self.all
        for price, _, i, _ in self.table.offers(reqs):
            if mask >> i & 1:
                return price
        return None

    def cheapest_offerings(
        self, mask: int, reqs: Mapping[str, Req]
    ) -> list[tuple[float, str, int, Offering]]:
        """(price, name, index, offering) of each type in ``mask`` at its cheapest allowed
        offering, cheapest first (by price, then name)."""
        mask &= self.all
        return [o for o in self.table.offers(reqs) if mask >> o[2] & 1]

    def capacity_types(self, mask: int, reqs: Mapping[str, Req]) -> list[str]:
        """Capacity types of the available offerings ``reqs`` allows on the types in ``mask``."""
        return self.table.capacity_types(mask & self.all, reqs)

    def max_capacity(self, name: str, mask: int) -> int:
        """The largest capacity of ``name`` among the types in ``mask``."""
        return self.table.max_capacity(name, mask & self.all)

    def headroom(self, mask: int, used: Mapping[str, int]) -> dict[str, int]:
        """Per resource, the most any type in ``mask`` could still hold beyond ``used``."""
        mask &= self.all
        return {
            name: max_in(values, self.fit_suffix[name], mask) - used.get(name, 0)
            for name, values in self.fit_values.items()
        }

    def distinct_values(self, key: str, req: Req, mask: int) -> int:
        """How many values of ``key`` (allowed by ``req``) the types in ``mask`` offer."""
        return self.table.distinct_values(key, req, mask & self.all)

    def largest(self, name: str) -> int:
        values = self.fit_values.get(name)
        return max_in(values, self.fit_suffix[name], self.all) if values else 0

    def count_at_least(self, name: str, amount: int) -> int:
        values = self.fit_values.get(name)
        if not values:
            return 0
        return (self.fit_suffix[name][bisect_left(values, amount)] & self.all).bit_count()


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

    The costly part of an index, its ``TypeTable``, is shared by every pool over the same
    catalog and DaemonSets with an equal ``table_key`` (the requirements that pick offerings,
    which DaemonSets run): 500 NodePools hold a handful of tables, and each pool only the mask of
    its types, memoised in the table per distinct requirement set.

    An index is reused while its pool's template is equal and the instance-type list and the
    DaemonSet templates are the *same objects* as when it was built; callers (the launcher's
    round, the offline planner) hand the same list back while nothing changed, so a changed
    catalog, an insufficient-capacity mark or a new DaemonSet builds a fresh index. The cache
    holds strong references to what it was keyed on, so identity cannot be recycled. It is a
    plain memo (no I/O); its entries are never mutated in a way a solve could observe."""

    def __init__(self, size: int = 4096, tables: int = 256) -> None:
        # A PoolIndex is small (its table is shared): room for upstream's 500-NodePool suite
        # several times over, so no round rebuilds a pool's index for want of space. A table
        # dropped from its LRU takes the pools' indexes over it along (stale templates must not
        # keep tables alive).
        self.size = size
        self.tables = tables
        self._tables: OrderedDict[
            tuple[int, TableKey], tuple[Sequence[InstanceType], Sequence[Pod], TypeTable]
        ] = OrderedDict()
        # id(catalog) -> (catalog, what every table over it starts from).
        self._catalogs: dict[int, tuple[Sequence[InstanceType], CatalogFacts]] = {}
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
        # The latest few bases: provisioning's and a disruption pass's solves interleave.
        self._bases: deque[ExistingBase] = deque(maxlen=4)

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

    def existing_base(self, existing: Sequence[ExistingNode]) -> ExistingBase:
        """The base of a solve over ``existing``: a recent one that holds the very same nodes (a
        round in which no node, NodeClaim or bound pod changed); else one cut from a recent one
        that holds them all (a disruption simulation's); else a recent one patched where only
        some nodes' pods changed; else a new one."""
        held = tuple(self._bases)  # a snapshot: other threads may add meanwhile
        for base in held:
            if base.same_nodes(existing):
                return base
        for base in held:
            cut = base.subset(existing)
            if cut is not None:
                return cut  # not kept: a simulation's own, and it would push out its parent
        patched = (base.patched(existing, self.existing_parts) for base in held)
        base = next((p for p in patched if p is not None), None) or ExistingBase(
            existing, self.existing_parts
        )
        self._bases.appendleft(base)
        if len(self._existing) > 4 * len(existing) + 1024:
            self._forget_parts()
        return base

    def _forget_parts(self) -> None:
        """Keep only the parts of nodes some held base still has. Each bound or finished pod
        makes its node a new ExistingNode; the old one, its parts and its pods' old versions
        would otherwise stay until the memo filled (hundreds of MB while 10,000 pods bind)."""
        live = {id(ex) for b in tuple(self._bases) for ex in b.existing}
        self._existing = {k: v for k, v in tuple(self._existing.items()) if k in live}

    def get(
        self, pool: PoolTemplate, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod]
    ) -> PoolIndex:
        key = _pool_key(pool)
        held = self._entries.get(key)
        if held is not None and held[0] is instance_types and _same_items(held[1], daemonsets):
            self.hits += 1
            return held[2]
        self.misses += 1
        index = PoolIndex(
            pool, instance_types, daemonsets, self.table(pool, instance_types, daemonsets)
        )
        self._entries.pop(key, None)
        self._entries[key] = (instance_types, tuple(daemonsets), index)
        _evict(self._entries, self.size)
        return index

    def table(
        self, pool: PoolTemplate, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod]
    ) -> TypeTable:
        """The shared table for ``pool`` over ``instance_types`` (built on first use)."""
        catalog = self._catalogs.get(id(instance_types))
        if catalog is None or catalog[0] is not instance_types:
            catalog = (instance_types, CatalogFacts.of(instance_types))
            if len(self._catalogs) >= self.tables:
                self._catalogs.clear()
            self._catalogs[id(instance_types)] = catalog
        requirements = pool_requirements(pool)
        tkey = table_key(requirements, pool.taints, daemonsets, catalog[1])
        key = (id(instance_types), tkey)
        held = self._tables.get(key)
        if held is not None and held[0] is instance_types and _same_items(held[1], daemonsets):
            return held[2]
        picks, _, read = tkey
        table = TypeTable(
            instance_types,
            picks,
            daemon_requirements=read,
            taints=pool.taints,
            daemonsets=daemonsets,
            catalog=catalog[1],
        )
        self._tables.pop(key, None)
        self._tables[key] = (instance_types, tuple(daemonsets), table)
        dropped = [held[2] for held in _evict(self._tables, self.tables)]
        if dropped:
            stale = [k for k, e in self._entries.items() if any(e[2].table is t for t in dropped)]
            for k in stale:
                self._entries.pop(k, None)
        return table


_K = TypeVar("_K")
_V = TypeVar("_V")


def _evict(entries: OrderedDict[_K, _V], size: int) -> list[_V]:
    """Drop the least recently used entries beyond ``size``; returns what was dropped."""
    dropped = []
    while len(entries) > size:
        try:
            dropped.append(entries.popitem(last=False)[1])
        except KeyError:  # emptied by another thread meanwhile
            break
    return dropped
