"""Re-pack a round's new NodeClaims onto cheaper instance types.

The greedy pass (``scheduler``) grows each NodeClaim while any type can still hold its pods, so a
claim fills towards the pool's largest type and launches the cheapest type that holds what it got.
That picks nodes by size, not by price per pod: on a mix of pod shapes it buys more than the pods
need. This step packs the pods that can move (the scheduler decides which: no volumes, and every
topology group involving them keyed on a domain they keep) again, workload by workload (pods
alike in requirements and domains), planning nodes by request vectors alone:

* one *target* type for the whole workload, first-fit decreasing class by class, for the few
  types whose fractional cost bound is lowest; or
* column generation over node patterns (Gilmore and Gomory): a small revised simplex with one
  row per pod shape, new patterns priced by knapsack fills under the LP's duals (greedy orders,
  a fill that re-weighs scarce resources, and an exact search where few fills exist), whole
  copies of the LP's patterns kept and the rest planned node by node by value per dollar;

whichever is cheaper by estimate. Then every pod goes in for real through ``NewClaim.try_add``,
so requirements, taints, host ports, DaemonSet overhead and minValues hold as in the greedy
pass, and each claim's options are every type that holds its final pods; the tail's least-filled
claims are merged in pairs where one type holds both for less. The result replaces the greedy
claims only when it costs less (``baseline``).

Consolidation's replacement choice comes from the same ``solve``, so it packs the same way.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from karpenter_py.scheduling.claims import NewClaim
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.podstate import PodState
from karpenter_py.scheduling.requirements import Requirements
from karpenter_py.scheduling.topology import Topology

# Types whose packing is simulated per pod shape: the lowest fractional bounds. The bound is
# close to the packed cost for the best few, so more candidates rarely change the choice.
CANDIDATES: Final = 6
# Per pod shape, the types with the lowest bound for it alone join the value plan's candidates.
PER_CLASS: Final = 3
# Column generation stops after this many patterns entered (it usually converges far sooner).
MAX_COLUMNS: Final = 120
# ... or once this many pivots in a row lowered the LP's cost by less than STALL_GAIN each.
STALL_PIVOTS: Final = 20
STALL_GAIN: Final = 1e-4
# The candidates (best by the cheap fills) that also get the slower ``_scarcity_fill``.
SCARCITY_CANDIDATES: Final = 3
SCARCITY_MAX_PODS: Final = 32
# A node's fills are all tried when there are at most this many (``_exact_fill``).
EXACT_FILLS: Final = 512
# The least-filled claims of a packing that are tried in pairs for a merge onto one node.
MERGE_CANDIDATES: Final = 12
# ... and is not tried unless it could save at least this fraction (by a cheap lower bound).
MIN_GAIN: Final = 0.01
# A re-pack must save at least this fraction to replace the greedy claims (float noise aside).
MIN_SAVING: Final = 1e-9

_Vector = tuple[int, ...]


def claim_price(claim: NewClaim) -> float:
    """What the claim would launch at: its cheapest option at an allowed offering."""
    price = claim.index.cheapest_price(claim.mask, claim.requirements)
    return float("inf") if price is None else price


def repack(
    idx: PoolIndex,
    order: Sequence[PodState],
    *,
    baseline: float,
    pins: Mapping[int, Requirements],
    hostnames: Iterator[str],
    relax_min_values: bool,
    max_claims: int | None = None,
) -> list[NewClaim] | None:
    """New claims of pool ``idx`` for the pods in ``order`` (largest first), if they cost less
    than ``baseline`` (what the claims they come from cost, less what stays behind).

    ``pins`` (by pod index) are the topology domains a pod must keep: its node's value of every
    key a topology group involving it uses. None when no cheaper packing is found (or it needs
    more than ``max_claims`` claims). ``hostnames`` gives the new claims' placeholder names.
    """
    if not order or baseline <= _floor(idx, order) * (1 + MIN_GAIN):
        return None  # no packing could save enough to be worth the work
    groups: dict[tuple[object, ...], list[PodState]] = {}
    for st in order:
        groups.setdefault((id(st.requirements), *_pin_key(pins.get(st.index))), []).append(st)
    layout: list[_Pattern] = []
    for states in groups.values():
        layout.extend(_Workload(idx, states, pins.get(states[0].index)).layout())
    packed = _pack(idx, order, layout, pins, hostnames, relax_min_values)
    if packed is None or (max_claims is not None and len(packed) > max_claims):
        return None
    cost = sum(claim_price(c) for c in packed)
    if cost >= baseline * (1 - MIN_SAVING):
        return None
    return packed


def rebuild(claim: NewClaim, staying: Sequence[PodState]) -> NewClaim | None:
    """The claim with only the ``staying`` pods (added again in their order), under the same
    hostname and within the requirements it had, so every topology decision about them holds:
    the pods leaving it are ones no hostname rule involves. None if a pod no longer goes in."""
    idx = claim.index
    topology = Topology(universe={}, placed=(), namespace_labels={})
    out = NewClaim(
        idx,
        claim.hostname,
        idx.all,
        relax_min_values=claim.relax_min_values,
        pinned=claim.requirements,
    )
    for st in staying:
        if out.try_add(st, topology, st.signature) is not None:
            return None
    return out


def _floor(idx: PoolIndex, order: Sequence[PodState]) -> float:
    """A lower bound on what any nodes of the pool holding these pods cost: each resource's
    total bought at the pool's cheapest rate for it (price over what a type has left of it)."""
    demand: dict[str, int] = {}
    for st in order:
        for name, amount in st.pod.requests.items():
            demand[name] = demand.get(name, 0) + amount
    best = 0.0
    for name, total in demand.items():
        best = max(best, total * resource_rate(idx, name))
    return best


def resource_rate(idx: PoolIndex, name: str) -> float:
    """The pool's cheapest price per unit of resource ``name`` (a type's price over what it has
    of it for pods), memoised on the index; 0 when no type has any."""
    rate = idx.rate_cache.get(name)
    if rate is None:
        rate = min(
            (
                p / idx.effective[i][name]
                for p, _, i, _ in idx.offers(idx.requirements)
                if idx.effective[i].get(name, 0) > 0
            ),
            default=0.0,
        )
        idx.rate_cache[name] = rate
    return rate


def _pin_key(pinned: Requirements | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not pinned:
        return ()
    return tuple(sorted((k, tuple(sorted(r.values))) for k, r in pinned.items()))


# ---------------------------------------------------------------------- planning by shape
@dataclass(frozen=True, slots=True)
class _Pattern:
    """``mult`` nodes capped at type ``target``, each taking ``take[c]`` pods of class c."""

    target: int
    pinned: Requirements | None  # topology domains the nodes must keep
    classes: tuple[tuple[PodState, ...], ...]  # the workload's pods, class by class
    take: tuple[int, ...]
    mult: int


class _Workload:
    """Pods alike in requirements, as classes of equal requests, and the types that could hold
    them; plans nodes for them by request vectors alone (no requirement checks: ``_pack`` does
    those when it places the pods for real)."""

    def __init__(
        self, idx: PoolIndex, states: Sequence[PodState], pinned: Requirements | None
    ) -> None:
        self.idx = idx
        self.pinned = pinned
        self.reqs = idx.requirements & states[0].requirements
        if pinned:
            self.reqs = self.reqs & pinned
        self.names = tuple(sorted({n for st in states for n in st.pod.requests}))
        by_vec: dict[_Vector, list[PodState]] = {}
        for st in states:
            by_vec.setdefault(tuple(st.pod.requests.get(n, 0) for n in self.names), []).append(st)
        self.vecs = list(by_vec)
        self.pods = [tuple(v) for v in by_vec.values()]
        self.mask = idx.reqs_mask(self.reqs) & idx.offering_mask(self.reqs)
        self.prices = [(o[0], o[2]) for o in idx.offers(self.reqs) if self.mask >> o[2] & 1]
        self.caps = {
            i: tuple(idx.effective[i].get(n, 0) for n in self.names) for _, i in self.prices
        }
        self._priced: dict[_Vector, tuple[float, int]] = {}
        self._fits: dict[int, frozenset[int]] = {}
        self._sized: dict[int, list[list[float]]] = {}
        self.frontier = self._frontier()

    def _frontier(self) -> tuple[tuple[float, int], ...]:
        """The types no other type beats (as cheap or cheaper, at least as much of every
        resource the pods ask for): the only ones a plan needs to consider as targets."""
        key = (self.idx.offer_key(self.reqs), self.mask, self.names)
        held = self.idx.frontier_cache.get(key)
        if held is not None:
            return held
        kept: list[tuple[float, int]] = []
        kept_mask = 0  # the types kept so far: each as cheap as or cheaper than the next
        for price, i in self.prices:
            # The types with at least this one's room in every resource asked for, as a mask.
            at_least = self.idx.fit_mask(dict(zip(self.names, self.caps[i], strict=True)))
            if at_least & kept_mask:
                continue
            kept.append((price, i))
            kept_mask |= 1 << i
        out = tuple(kept)
        self.idx.frontier_cache[key] = out
        return out

    def cheapest(self, fill: _Vector) -> tuple[float, int]:
        """(price, type) of the cheapest type that holds ``fill`` (memoised); type -1 if none."""
        hit = self._priced.get(fill)
        if hit is None:
            fit = self.idx.fit_mask(dict(zip(self.names, fill, strict=True)))
            # A type some other beats holds nothing that other does not: scan the frontier.
            hit = next(((p, i) for p, i in self.frontier if fit >> i & 1), (float("inf"), -1))
            self._priced[fill] = hit
        return hit

    def layout(self) -> list[_Pattern]:
        """The cheapest, by estimate, of the plans below (each a list of node patterns)."""
        plans = [p for p in (self._single_target(), self._by_columns()) if p]
        if not plans:
            return []
        return min(plans, key=self._estimate)

    def _estimate(self, plan: list[_Pattern]) -> float:
        return sum(self.cheapest(self._fill(p.take))[0] * p.mult for p in plan)

    def _fill(self, take: Sequence[int]) -> _Vector:
        fill = tuple(0 for _ in self.names)
        for vec, k in zip(self.vecs, take, strict=True):
            if k:
                fill = _plus(fill, vec, k)
        return fill

    def _bounds(
        self, vecs_counts: Sequence[tuple[_Vector, int]], best: int
    ) -> list[tuple[float, int]]:
        """(fractional cost, type) of the ``best`` types, lowest first, among those that hold
        each of these pods alone: price times the most-demanded resource's share of the type."""
        resources = range(len(self.names))
        largest = [max(v[r] for v, _ in vecs_counts) for r in resources]
        demand = [(r, sum(v[r] * c for v, c in vecs_counts)) for r in resources]
        demand = [(r, d) for r, d in demand if d]
        out = []
        caps = self.caps
        # Explicit loops: this runs per pod shape over every frontier type.
        for price, i in self.frontier:
            cap = caps[i]
            for r in resources:
                if largest[r] > cap[r]:
                    break
            else:
                share = 0.0
                for r, d in demand:
                    if d > share * cap[r]:
                        share = d / cap[r]
                out.append((price * share, i))
        return heapq.nsmallest(best, out)

    def _single_target(self) -> list[_Pattern]:
        counts = [(v, len(p)) for v, p in zip(self.vecs, self.pods, strict=True)]
        best: tuple[float, list[_Pattern]] | None = None
        for _, i in self._bounds(counts, CANDIDATES):
            plan = [
                _Pattern(i, self.pinned, tuple(self.pods), take, mult)
                for take, mult in _ffd([c for _, c in counts], self.vecs, self.caps[i])
            ]
            cost = self._estimate(plan)
            if best is None or cost < best[0]:
                best = (cost, plan)
        return [] if best is None else best[1]

    def _values(self) -> tuple[list[float], list[int]]:
        """Per class, what one pod costs alone at its best type's rate (price times its share
        of the type); and the candidate types: each class's ``PER_CLASS`` best."""
        value: list[float] = []
        candidates: dict[int, None] = {}
        for vec in self.vecs:
            bounds = self._bounds([(vec, 1)], PER_CLASS)
            value.append(bounds[0][0] if bounds else 0.0)
            candidates.update((i, None) for _, i in bounds)
        return value, list(candidates)

    def _best_fill(
        self,
        left: Sequence[int],
        value: Sequence[float],
        candidates: Sequence[int],
    ) -> tuple[float, float, list[int], int] | None:
        """The node with the most value per dollar. Per candidate type, the pods left are
        taken in a knapsack's greedy order (most value per size first, for a few ways of
        sizing), each class as many as fit; for the best few candidates also by
        ``_scarcity_fill``. A fill is priced at the cheapest type that holds it.
        (rate, price, take, that type)."""
        best: tuple[float, float, list[int], int] | None = None
        live = [c for c in range(len(left)) if left[c] and value[c] > 0]
        rated: list[tuple[float, int, list[int]]] = []
        for i in candidates:
            cap = self.caps[i]
            fitting = [c for c in live if c in self._fitting(i)]
            if not fitting:
                continue
            best_here = 0.0
            most = 0
            for sizes in self._sizes(i):
                order = sorted(fitting, key=lambda c: -value[c] / sizes[c])
                take, fill = _first_fit(left, self.vecs, cap, order)
                best, rate = self._rate(best, take, fill, value)
                best_here = max(best_here, rate)
                most = max(most, sum(take))
            # Only small nodes need the finer fill: on a node of many pods, taking whole
            # classes wastes little.
            if most <= SCARCITY_MAX_PODS:
                rated.append((-best_here, i, fitting))
        rated.sort(key=lambda r: r[0])
        for _, i, fitting in rated[:SCARCITY_CANDIDATES]:
            take, fill = _scarcity_fill(left, self.vecs, self.caps[i], value, fitting)
            best, _ = self._rate(best, take, fill, value)
        # Where few fills are possible (small rounds, small nodes), try them all: the greedy
        # orders take each class as far as it goes and miss mixes like {3, 2, 2}.
        for _, i, fitting in rated:
            exact = _exact_fill(left, self.vecs, self.caps[i], value, fitting)
            if exact is not None:
                best, _ = self._rate(best, exact[0], exact[1], value)
        return best

    def _rate(
        self,
        best: tuple[float, float, list[int], int] | None,
        take: list[int],
        fill: _Vector,
        value: Sequence[float],
    ) -> tuple[tuple[float, float, list[int], int] | None, float]:
        """``take``'s value per dollar, and the better of it and ``best``."""
        worth = sum(k * v for k, v in zip(take, value, strict=True) if k)
        if worth <= 0:
            return best, 0.0
        price, target = self.cheapest(fill)
        rate = worth / price
        if best is None or rate > best[0]:
            return (rate, price, take, target), rate
        return best, rate

    def _sizes(self, i: int) -> list[list[float]]:
        """Per way of sizing in ``_MEASURES``, each class's size on type ``i`` (memoised)."""
        held = self._sized.get(i)
        if held is None:
            cap = self.caps[i]
            held = [[measure(vec, cap) for vec in self.vecs] for measure in _MEASURES]
            self._sized[i] = held
        return held

    def _fitting(self, i: int) -> frozenset[int]:
        """The classes one pod of which fits type ``i`` alone."""
        held = self._fits.get(i)
        if held is None:
            cap = self.caps[i]
            held = frozenset(
                c
                for c, vec in enumerate(self.vecs)
                if all(v <= k for v, k in zip(vec, cap, strict=True))
            )
            self._fits[i] = held
        return held

    def _by_value(
        self, left: list[int], value: Sequence[float], candidates: Sequence[int]
    ) -> list[_Pattern]:
        """Node by node, the fill with the most value per dollar from the pods ``left``;
        identical nodes are opened together, so the loop runs once per distinct node."""
        plan: list[_Pattern] = []
        while any(left):
            best = self._best_fill(left, value, candidates)
            if best is None:
                break  # what is left fits no candidate: ``_pack`` places it first-fit
            _, _, take, target = best
            mult = min(n // k for n, k in zip(left, take, strict=True) if k)
            for c, k in enumerate(take):
                left[c] -= k * mult
            plan.append(_Pattern(target, self.pinned, tuple(self.pods), tuple(take), mult))
        return plan

    def _by_columns(self) -> list[_Pattern]:
        """The LP over node patterns (Gilmore and Gomory's column generation for cutting
        stock): pattern counts x >= 0 covering every class exactly at least cost, solved by a
        revised simplex over one row per class, new patterns priced by the greedy knapsack of
        ``_best_fill`` under the LP's duals. Whole copies of its patterns are kept; the pods
        left over are planned node by node with the same values. (Solving the LP again for
        what is left was tried: no cheaper on the cost benchmark, and three times slower.)"""
        value, candidates = self._values()
        left = [len(p) for p in self.pods]
        plan: list[_Pattern] = []
        master = self._columns(left, value, candidates)
        if master is not None:
            for take, target, x in master.solution():
                mult = int(x + 1e-9)
                if mult:
                    plan.append(_Pattern(target, self.pinned, tuple(self.pods), tuple(take), mult))
                    for c, k in enumerate(take):
                        left[c] -= k * mult
        return plan + self._by_value(left, value, candidates)

    def _columns(
        self, counts: Sequence[int], value: Sequence[float], candidates: Sequence[int]
    ) -> _Master | None:
        """The master LP for ``counts``, solved as far as the pricing finds better patterns."""
        master = _Master.start(self, counts, candidates)
        if master is None:
            return None
        cost = master.cost()
        stalled = 0
        for _ in range(MAX_COLUMNS):
            duals = master.duals()
            # (Trying the cheap fills alone first, and the finer one only when they find
            # nothing, was no faster overall and dearer on the cost benchmark.)
            best = self._best_fill(counts, duals, candidates)
            if best is None or not _improves(best, duals):
                break
            if not master.enter(best[2], best[1], best[3]):
                break
            # Degenerate pivots can go on long for little: stop when the cost stops falling.
            now = master.cost()
            stalled = stalled + 1 if now > cost * (1 - STALL_GAIN) else 0
            cost = min(cost, now)
            if stalled >= STALL_PIVOTS:
                break
        return master


def _improves(best: tuple[float, float, list[int], int] | None, duals: Sequence[float]) -> bool:
    """Whether a pattern has negative reduced cost under ``duals`` (it would lower the LP)."""
    if best is None:
        return False
    _, price, take, _ = best
    return price - sum(d * k for d, k in zip(duals, take, strict=True) if k) < -1e-9 * price


class _Master:
    """The restricted master LP of ``_Workload._by_columns``: min price·x with A x = counts,
    x >= 0, as a basis of one pattern per class with its inverse kept dense (classes are few,
    so a pivot is a few hundred multiplications)."""

    def __init__(
        self, columns: list[list[int]], prices: list[float], targets: list[int], x: list[float]
    ) -> None:
        n = len(columns)
        self.columns = columns
        self.prices = prices
        self.targets = targets
        self.x = x
        self.inverse = [
            [(1.0 / columns[r][r]) if r == c else 0.0 for c in range(n)] for r in range(n)
        ]

    @staticmethod
    def start(w: _Workload, counts: Sequence[int], candidates: Sequence[int]) -> _Master | None:
        """The basis of single-class patterns: each class alone, as many as fit, on its best
        candidate type (a class with no pods left keeps a one-pod column at zero). None when
        some class fits no candidate."""
        columns: list[list[int]] = []
        prices: list[float] = []
        targets: list[int] = []
        for c, n in enumerate(counts):
            only = [0] * len(counts)
            only[c] = max(n, 1)
            best = w._best_fill(
                only, [1.0 if k == c else 0.0 for k in range(len(counts))], candidates
            )
            if best is None:
                return None
            # _best_fill maximises pods per dollar for one class: its best single-class node.
            columns.append(best[2])
            prices.append(best[1])
            targets.append(best[3])
        x = [n / columns[c][c] for c, n in enumerate(counts)]
        return _Master(columns, prices, targets, x)

    def duals(self) -> list[float]:
        n = len(self.prices)
        return [sum(self.prices[r] * self.inverse[r][c] for r in range(n)) for c in range(n)]

    def enter(self, column: list[int], price: float, target: int) -> bool:
        """Pivot ``column`` into the basis (the ratio test picks the row it replaces); False
        when no row limits it (cannot happen with positive prices) or the step is degenerate
        at every row (the caller then stops)."""
        n = len(self.prices)
        d = [sum(self.inverse[r][c] * column[c] for c in range(n)) for r in range(n)]
        leave = -1
        theta = 0.0
        for r in range(n):
            if d[r] > 1e-12:
                t = self.x[r] / d[r]
                if leave < 0 or t < theta - 1e-12:
                    leave, theta = r, t
        if leave < 0:
            return False
        pivot = d[leave]
        row = [v / pivot for v in self.inverse[leave]]
        for r in range(n):
            if r != leave and d[r]:
                f = d[r]
                self.inverse[r] = [a - f * b for a, b in zip(self.inverse[r], row, strict=True)]
                self.x[r] -= f * theta
        self.inverse[leave] = row
        self.x[leave] = theta
        self.columns[leave] = column
        self.prices[leave] = price
        self.targets[leave] = target
        return True

    def cost(self) -> float:
        return sum(p * x for p, x in zip(self.prices, self.x, strict=True))

    def solution(self) -> list[tuple[list[int], int, float]]:
        return [
            (col, target, max(x, 0.0))
            for col, target, x in zip(self.columns, self.targets, self.x, strict=True)
        ]


def best_fill(
    left: Sequence[int],
    vecs: Sequence[_Vector],
    cap: _Vector,
    value: Sequence[float],
    live: Sequence[int],
) -> list[int]:
    """The most valuable fill of one node of ``cap`` from the pods ``left`` of the classes
    ``live``: every fill where few exist (``_exact_fill``), else the best of the greedy orders
    (each way of sizing in ``_MEASURES``) and ``_scarcity_fill``."""
    exact = _exact_fill(left, vecs, cap, value, live)
    if exact is not None:
        return exact[0]
    candidates = [_scarcity_fill(left, vecs, cap, value, live)[0]]
    for measure in _MEASURES:
        sizes = {c: measure(vecs[c], cap) for c in live}
        order = sorted(live, key=lambda c: -value[c] / sizes[c])
        candidates.append(_first_fit(left, vecs, cap, order)[0])
    return max(candidates, key=lambda take: sum(k * v for k, v in zip(take, value, strict=True)))


def _first_fit(
    left: Sequence[int], vecs: Sequence[_Vector], cap: _Vector, order: Sequence[int]
) -> tuple[list[int], _Vector]:
    """How many of each class one node of ``cap`` takes, classes in ``order``, each as many as
    fit; and the node's fill. (The innermost loop of planning: written out, not via ``_room``.)"""
    room = list(cap)
    take = [0] * len(left)
    for c in order:
        k = left[c]
        if not k:
            continue
        vec = vecs[c]
        for r, v in enumerate(vec):
            if v:
                most = room[r] // v
                if most < k:
                    k = most
                    if k <= 0:
                        break
        if k > 0:
            take[c] = k
            for r, v in enumerate(vec):
                room[r] -= v * k
    return take, tuple(c - r for c, r in zip(cap, room, strict=True))


def _scarcity_fill(
    left: Sequence[int],
    vecs: Sequence[_Vector],
    cap: _Vector,
    value: Sequence[float],
    live: Sequence[int],
) -> tuple[list[int], _Vector]:
    """A fill that re-weighs resources as the node fills: each step takes, from the class with
    the most value per share of what is *left* of the node, half of what of it still fits (at
    least one), so a resource running out makes the pods that need it look dear."""
    room = list(cap)
    take = [0] * len(left)
    # Each class as (class, its requested resources): a class that stops fitting never fits
    # again (room only shrinks), so it leaves the list for good.
    open_classes = [(c, [(r, v) for r, v in enumerate(vecs[c]) if v]) for c in live]
    while open_classes:
        best_c, best_density, best_k = -1, 0.0, 0
        still = []
        for c, parts in open_classes:
            avail = left[c] - take[c]
            k = avail
            size = 0.0
            for r, v in parts:
                free = room[r]
                most = free // v
                if most < k:
                    k = most
                if k <= 0:
                    break
                size += v / free
            if k <= 0:
                continue
            still.append((c, parts))
            density = value[c] / size if size else float("inf")
            if density > best_density:
                best_c, best_density, best_k = c, density, k
        open_classes = still
        if best_c < 0:
            break
        step = max(1, best_k // 2)
        take[best_c] += step
        for r, v in enumerate(vecs[best_c]):
            room[r] -= v * step
    return take, tuple(c - r for c, r in zip(cap, room, strict=True))


def _exact_fill(
    left: Sequence[int],
    vecs: Sequence[_Vector],
    cap: _Vector,
    value: Sequence[float],
    live: Sequence[int],
) -> tuple[list[int], _Vector] | None:
    """The most valuable fill of one node of ``cap`` (a bounded knapsack, by depth-first
    search over how many of each class), or None when that could be more than
    ``EXACT_FILLS`` fills."""
    empty = tuple(0 for _ in cap)
    bounds = [(c, min(left[c], _room(empty, vecs[c], cap))) for c in live]
    bounds = [(c, most) for c, most in bounds if most > 0]
    space = 1
    for _, most in bounds:
        space *= most + 1
        if space > EXACT_FILLS:
            return None
    search = _FillSearch(vecs, cap, value, bounds, len(left))
    search.run(0, 0.0)
    if search.best_worth <= 0:
        return None
    fill = [0] * len(cap)
    for c, k in enumerate(search.best_take):
        for r, v in enumerate(vecs[c]):
            fill[r] += v * k
    return search.best_take, tuple(fill)


class _FillSearch:
    """``_exact_fill``'s depth-first search: class by class, every count that still fits."""

    def __init__(
        self,
        vecs: Sequence[_Vector],
        cap: _Vector,
        value: Sequence[float],
        bounds: Sequence[tuple[int, int]],
        classes: int,
    ) -> None:
        self.vecs = vecs
        self.value = value
        self.bounds = bounds
        self.room = list(cap)
        self.take = [0] * classes
        self.best_take = [0] * classes
        self.best_worth = 0.0

    def run(self, pos: int, worth: float) -> None:
        if worth > self.best_worth:
            self.best_worth, self.best_take = worth, list(self.take)
        if pos == len(self.bounds):
            return
        c, most = self.bounds[pos]
        parts = [(r, v) for r, v in enumerate(self.vecs[c]) if v]
        room = self.room
        k = 0
        while True:
            self.run(pos + 1, worth + k * self.value[c])
            if k == most or any(v > room[r] for r, v in parts):
                break
            k += 1
            self.take[c] = k
            for r, v in parts:
                room[r] -= v
        self.take[c] = 0
        for r, v in parts:
            room[r] += v * k


def _share(vec: _Vector, cap: _Vector) -> float:
    """The largest fraction of ``cap`` one item ``vec`` takes (its bottleneck resource)."""
    return max((_part(v, c) for v, c in zip(vec, cap, strict=True) if v), default=0.0) or 1e-12


def _total_share(vec: _Vector, cap: _Vector) -> float:
    """The sum of the fractions of ``cap`` one item ``vec`` takes."""
    return sum(_part(v, c) for v, c in zip(vec, cap, strict=True) if v) or 1e-12


def _square_share(vec: _Vector, cap: _Vector) -> float:
    """The Euclidean size of ``vec`` relative to ``cap``."""
    return sum(_part(v, c) ** 2 for v, c in zip(vec, cap, strict=True) if v) ** 0.5 or 1e-12


def _part(v: int, c: int) -> float:
    """The fraction ``v`` is of ``c``; infinite where the type has none of what is asked."""
    return v / c if c > 0 else float("inf")


# Ways to size a pod against a node, for the knapsack's greedy order: each finds fills the
# others miss (the bottleneck share packs one scarce resource, the sums balance them).
_MEASURES: Final = (_share, _total_share, _square_share)


def _ffd(
    counts: Sequence[int], vecs: Sequence[_Vector], cap: _Vector
) -> list[tuple[tuple[int, ...], int]]:
    """First-fit decreasing of identical-item classes into bins of ``cap``: (take, bins).

    First fit puts as many items of a class into the first open bin as fit before moving on, so
    a class is placed bin by bin rather than item by item, and bins with the same contents are
    one entry with a multiplicity: the work grows with shapes, not pods.
    """
    fills: list[_Vector] = []
    takes: list[tuple[int, ...]] = []
    mults: list[int] = []
    empty = tuple(0 for _ in cap)
    none = tuple(0 for _ in counts)
    for c, (vec, count) in enumerate(zip(vecs, counts, strict=True)):
        left = count
        pos = 0
        while left and pos < len(fills):
            k = _room(fills[pos], vec, cap)
            if not k:
                pos += 1
                continue
            n = min(mults[pos], left // k)
            if n:  # ``n`` bins of this kind get k items each
                _split(
                    fills, takes, mults, pos, n, _plus(fills[pos], vec, k), _bump(takes[pos], c, k)
                )
                left -= n * k
            else:  # fewer than k items left: the first such bin takes them all
                _split(
                    fills,
                    takes,
                    mults,
                    pos,
                    1,
                    _plus(fills[pos], vec, left),
                    _bump(takes[pos], c, left),
                )
                left = 0
            pos += 1
        if left:
            per = _room(empty, vec, cap)
            if per <= 0:
                continue  # bigger than the cap: ``_pack`` gives it a node of its own
            full, rest = divmod(left, per)
            if full:
                fills.append(_plus(empty, vec, per))
                takes.append(_bump(none, c, per))
                mults.append(full)
            if rest:
                fills.append(_plus(empty, vec, rest))
                takes.append(_bump(none, c, rest))
                mults.append(1)
    return list(zip(takes, mults, strict=True))


def _bump(take: tuple[int, ...], c: int, k: int) -> tuple[int, ...]:
    return (*take[:c], take[c] + k, *take[c + 1 :])


def _split(
    fills: list[_Vector],
    takes: list[tuple[int, ...]],
    mults: list[int],
    pos: int,
    n: int,
    fill: _Vector,
    take: tuple[int, ...],
) -> None:
    """Give ``n`` of the bins at ``pos`` the new contents; the rest stay as they were."""
    if n == mults[pos]:
        fills[pos], takes[pos] = fill, take
    else:
        mults[pos] -= n
        fills.insert(pos, fill)
        takes.insert(pos, take)
        mults.insert(pos, n)


def _room(used: _Vector, vec: _Vector, cap: _Vector) -> int:
    """How many more items ``vec`` fit beside ``used`` in ``cap`` (vectors request something)."""
    k = 1 << 30
    for u, v, c in zip(used, vec, cap, strict=True):
        if v:
            room = (c - u) // v
            if room < k:
                k = room
    return k


def _plus(used: _Vector, vec: _Vector, k: int) -> _Vector:
    return tuple(u + v * k for u, v in zip(used, vec, strict=True))


# ---------------------------------------------------------------------- packing for real
class _Bin:
    __slots__ = ("cap", "claim")

    def __init__(self, claim: NewClaim, cap: Mapping[str, int] | None) -> None:
        self.claim = claim
        self.cap = cap

    def admits(self, requests: Mapping[str, int]) -> bool:
        """A cheap necessary condition for ``requests`` to join: within the cap, or, uncapped,
        within what some remaining option could hold."""
        cap = self.cap
        if cap is None:
            return self.claim.has_room(requests)
        used = self.claim.requests
        for name, amount in requests.items():
            if used.get(name, 0) + amount > cap.get(name, 0):
                return False
        return True


def _pack(
    idx: PoolIndex,
    order: Sequence[PodState],
    layout: Sequence[_Pattern],
    pins: Mapping[int, Requirements],
    hostnames: Iterator[str],
    relax_min_values: bool,
) -> list[NewClaim] | None:
    """Place the pods for real, through ``try_add``: first the planned nodes, each taking its
    pattern's pods; then whatever did not go in as planned (or was not planned), first-fit in
    ``order`` into the open nodes under their caps, else into a new uncapped node."""
    # The pods moved here keep every topology domain that matters to them (the caller checks),
    # so an empty Topology answers for them as the solve's own would, without re-counting them.
    topology = Topology(universe={}, placed=(), namespace_labels={})
    queues: dict[int, deque[PodState]] = {}
    bins: list[_Bin] = []
    placed: set[int] = set()
    for pattern in layout:
        cap = idx.effective[pattern.target]
        for _ in range(pattern.mult):
            claim = NewClaim(
                idx,
                next(hostnames),
                idx.all,
                relax_min_values=relax_min_values,
                pinned=pattern.pinned,
            )
            b = _Bin(claim, cap)
            for pods, k in zip(pattern.classes, pattern.take, strict=True):
                queue = queues.setdefault(id(pods), deque(pods))
                batch = [queue.popleft() for _ in range(min(k, len(queue)))]
                if not batch:
                    continue
                # A class's pods are alike in requests: usually they all go in with one check.
                if b.admits(_times(batch[0].pod.requests, len(batch))) and claim.try_add_all(
                    batch, topology
                ):
                    placed.update(st.index for st in batch)
                    continue
                for st in batch:
                    if (
                        b.admits(st.pod.requests)
                        and claim.try_add(st, topology, st.signature) is None
                    ):
                        placed.add(st.index)
            if claim.pods:
                bins.append(b)
    rest = [st for st in order if st.index not in placed]
    if not _first_fit_into(idx, rest, bins, pins, topology, hostnames, relax_min_values):
        return None
    claims = [b.claim for b in bins]
    return merge_tail(idx, claims, pins, topology, hostnames, relax_min_values)


def merge_tail(
    idx: PoolIndex,
    claims: list[NewClaim],
    pins: Mapping[int, Requirements],
    topology: Topology,
    hostnames: Iterator[str],
    relax_min_values: bool,
) -> list[NewClaim]:
    """Merge pairs of the least-filled claims onto one node where a type holds both for less
    than the two cost: rounding a plan leaves a few part-filled nodes at its tail."""
    if len(claims) < 2:
        return claims
    fill = {id(c): _utilisation(c) for c in claims}
    tail = sorted(claims, key=lambda c: fill[id(c)])[:MERGE_CANDIDATES]
    gone: set[int] = set()
    added: list[NewClaim] = []
    for n, a in enumerate(tail):
        if id(a) in gone:
            continue
        for b in tail[n + 1 :]:
            if id(b) in gone:
                continue
            both = claim_price(a) + claim_price(b)
            total = dict(a.requests)
            for name, amount in b.requests.items():
                total[name] = total.get(name, 0) + amount
            least = idx.cheapest_price(idx.fit_mask(total), a.requirements & b.requirements)
            if least is None or least >= both * (1 - MIN_SAVING):
                continue
            merged = _rebuild(idx, [*b.pods, *a.pods], pins, topology, hostnames, relax_min_values)
            if merged is not None and claim_price(merged) < both * (1 - MIN_SAVING):
                gone.update((id(a), id(b)))
                added.append(merged)
                break
    return [c for c in claims if id(c) not in gone] + added


def _rebuild(
    idx: PoolIndex,
    pods: Sequence[PodState],
    pins: Mapping[int, Requirements],
    topology: Topology,
    hostnames: Iterator[str],
    relax_min_values: bool,
) -> NewClaim | None:
    """One claim holding ``pods`` (all through ``try_add``, each pod's domains kept), or None."""
    claim = NewClaim(
        idx,
        next(hostnames),
        idx.all,
        relax_min_values=relax_min_values,
        pinned=pins.get(pods[0].index),
    )
    for st in pods:
        if claim.try_add(st, topology, st.signature) is not None:
            return None
    if not all(_keeps(claim, pins.get(st.index)) for st in pods):
        return None
    return claim


def _utilisation(claim: NewClaim) -> float:
    """How full the claim's cheapest option is: its most-used resource's share."""
    idx = claim.index
    for _, _, i, _ in idx.offers(claim.requirements):
        if claim.mask >> i & 1:
            eff = idx.effective[i]
            return max(
                (v / eff[n] for n, v in claim.requests.items() if v and eff.get(n, 0) > 0),
                default=0.0,
            )
    return 1.0


def _first_fit_into(
    idx: PoolIndex,
    order: Sequence[PodState],
    bins: list[_Bin],
    pins: Mapping[int, Requirements],
    topology: Topology,
    hostnames: Iterator[str],
    relax_min_values: bool,
) -> bool:
    """First fit of ``order`` into ``bins`` (appending new uncapped ones as needed); False when a
    pod fits not even a node of its own. A node drops out of the scan once not even the
    smallest pod still to come could join it."""
    smallest = _suffix_minima(order)
    scan = [b for b in bins if not order or b.admits(smallest[0])]
    for pos, st in enumerate(order):
        requests = st.pod.requests
        pinned = pins.get(st.index)
        for b in scan:
            if (
                b.admits(requests)
                and _keeps(b.claim, pinned)
                and b.claim.try_add(st, topology, st.signature) is None
            ):
                break
        else:
            claim = NewClaim(
                idx, next(hostnames), idx.all, relax_min_values=relax_min_values, pinned=pinned
            )
            if claim.try_add(st, topology, st.signature) is not None:
                return False  # cannot happen for a pod the greedy pass placed; keep its plan
            b = _Bin(claim, None)
            bins.append(b)
            scan.append(b)
        if pos + 1 < len(order) and smallest[pos + 1] is not smallest[pos]:
            upcoming = smallest[pos + 1]
            scan = [b for b in scan if b.admits(upcoming)]
    return True


def _times(requests: Mapping[str, int], k: int) -> dict[str, int]:
    return {name: amount * k for name, amount in requests.items()}


def _keeps(claim: NewClaim, pinned: Requirements | None) -> bool:
    """Whether the claim is already within the domains ``pinned`` allows, key by key."""
    if not pinned:
        return True
    for key, req in pinned.items():
        held = claim.requirements.get(key)
        if held is None or held.complement or not held.values <= req.values:
            return False
    return True


def _suffix_minima(order: Sequence[PodState]) -> list[Mapping[str, int]]:
    """Per position, the least of each resource any pod from there on requests (one object per
    distinct value, so a change is an identity test)."""
    out: list[Mapping[str, int]] = [{}] * len(order)
    current: dict[str, int] | None = None
    for pos in range(len(order) - 1, -1, -1):
        requests = order[pos].pod.requests
        if current is None:
            current = dict(requests)
        else:
            lower = {n: min(v, requests.get(n, 0)) for n, v in current.items()}
            if lower != current:
                current = lower
        out[pos] = current
    return out
