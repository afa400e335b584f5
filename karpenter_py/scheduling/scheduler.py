"""``solve``: place pending pods on existing nodes, NodeClaims in flight, then new NodeClaims.

The loop follows upstream's provisioning scheduler: pods are taken largest first (cpu, then
memory); each goes to the first existing node that fits, else to the NodeClaim being built with
the fewest pods that fits, else to a new NodeClaim from the first NodePool (by weight) that can
hold it. A pod that fails is relaxed one preference and retried at the back of the queue; the loop
ends when a full pass over the queue places nothing and relaxes nothing.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import Offering
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
)
from karpenter_py.model.quantity import Resources
from karpenter_py.scheduling.claims import ExistingSlot, NewClaim, relax_min_values
from karpenter_py.scheduling.diagnose import diagnose
from karpenter_py.scheduling.existing import BLOCK, ExistingBase, SlotParts, existing_slot_parts
from karpenter_py.scheduling.fill import Bin, Vector, plan_fill, worth
from karpenter_py.scheduling.inputs import (
    PoolTemplate,
    SolveInput,
    VolumeAlternatives,
)
from karpenter_py.scheduling.instances import (
    IndexCache,
    PoolIndex,
)
from karpenter_py.scheduling.packing import claim_price, rebuild, repack
from karpenter_py.scheduling.plan import ExistingPlacement, NewNodeClaim, Plan, PodError
from karpenter_py.scheduling.podstate import PodState, RequirementsCache
from karpenter_py.scheduling.requirements import Req, Requirements, compatible
from karpenter_py.scheduling.reservations import RESERVATION_ID, ReservationLedger
from karpenter_py.scheduling.taints import untolerated
from karpenter_py.scheduling.topology import DomainSource, Topology


def solve(
    inp: SolveInput,
    *,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    indexes: IndexCache | None = None,
) -> Plan:
    """Decide where every pod goes. Pure: the same input always gives the same plan. With
    ``indexes``, each pool's instance-type index is reused across solves (see IndexCache)."""
    return _Solver(inp, namespace_labels or {}, indexes).run()


def static_claims(
    inp: SolveInput, count: int, *, indexes: IndexCache | None = None
) -> tuple[NewNodeClaim, ...] | str:
    """``count`` NodeClaims of the input's one pool for no pod (a static NodePool's): its
    template requirements over every instance type with an offering, DaemonSet overhead as
    requests, finished exactly as the solver finishes a claim for pods. Or why none can be."""
    solver = _Solver(inp, {}, indexes)
    (idx,) = solver.indexes
    # Types whose DaemonSets fit: a node that cannot run its DaemonSets is no use to anyone.
    mask = idx.fit_mask({})
    if not idx.all:
        return f'nodepool "{idx.pool.name}": no instance type satisfies its requirements'
    if not mask:
        return f'nodepool "{idx.pool.name}": no instance type can hold its daemonsets'
    claims: list[NewNodeClaim] = []
    for n in range(count):
        claim = NewClaim(
            idx,
            f"hostname-placeholder-{n:05d}",
            mask,
            relax_min_values=inp.options.min_values_policy == "BestEffort",
        )
        done = solver._finalize(claim)
        if isinstance(done, str):
            return done
        claims.append(done.claim)
    return tuple(claims)


def order_pools(pools: Sequence[PoolTemplate]) -> list[PoolTemplate]:
    """Highest weight first; equal weights by name, descending (as upstream orders them)."""
    by_name = sorted(pools, key=lambda p: p.name, reverse=True)
    return sorted(by_name, key=lambda p: -p.weight)


def _pod_order(st: PodState) -> tuple[int, int, str, str]:
    req = st.pod.requests
    return (
        -req.get(RESOURCE_CPU, 0),
        -req.get(RESOURCE_MEMORY, 0),
        st.pod.creation_timestamp,
        st.pod.uid or st.pod.key,
    )


class _Solver:
    def __init__(
        self,
        inp: SolveInput,
        namespace_labels: Mapping[str, Mapping[str, str]],
        cache: IndexCache | None,
    ) -> None:
        self.inp = inp
        self.pools = order_pools(inp.pools)
        build = cache.get if cache is not None else PoolIndex
        self.indexes = [
            build(p, inp.instance_types.get(p.name, ()), inp.daemonsets) for p in self.pools
        ]
        # Reservations' room this solve, handed to the claims of pools that can use one.
        ledger = ReservationLedger.of(self.indexes)
        self.ledgers: dict[PoolIndex, ReservationLedger] = (
            {}
            if ledger is None
            else {
                idx: ledger
                for idx in self.indexes
                if ledger.compatible(idx, idx.requirements, idx.all)
            }
        )
        self.limits: dict[str, Resources] = {
            p.name: {k: v - p.usage.get(k, 0) for k, v in p.limits.items()}
            for p in self.pools
            if p.limits is not None
        }
        self.prefer_no_schedule = any(
            t.effect == "PreferNoSchedule" for p in self.pools for t in p.taints
        )
        base = (
            cache.existing_base(inp.existing)
            if cache is not None
            else ExistingBase(inp.existing, existing_slot_parts)
        )
        self.slots = ExistingSlots(base)
        # (signature, topology prefilter) -> the first existing slot a pod alike may still fit.
        # Slots only fill up during a solve, so a slot that refused a pod for want of room, a
        # taint, a label or a port refuses every later pod of its signature; one the prefilter
        # ruled out stays out under the same filter (hostname counts only grow, a node's domain
        # is fixed). A refusal by topology's full check may change as pods land: it stops the
        # resume point. In a cluster of 5,000 nodes a constrained pod otherwise scanned every
        # node before its first fit.
        self.resume: dict[object, int] = {}
        self.topology = Topology(
            universe=self._universe(),
            placed=(),
            existing=base.pods,
            namespace_labels=namespace_labels,
        )
        # NodeClaims being built, bucketed by pod count so "fewest pods first" needs no sorting.
        self.buckets: dict[int, dict[NewClaim, None]] = {}
        self.claims: list[NewClaim] = []
        self.charged: dict[NewClaim, Resources] = {}  # what each claim counts against limits
        self.cache: RequirementsCache = {}
        # Pod index -> its volumes' requirement alternatives; only pods that have some.
        self.volumes: dict[int, tuple[Requirements, ...]] = {}
        self._volume_cache: dict[VolumeAlternatives, tuple[Requirements, ...]] = {}

    # ------------------------------------------------------------------ setup
    def _universe(self) -> Mapping[str, Mapping[str, Sequence[DomainSource]]]:
        """Every value each label can take on a node: from NodePools' types and from existing
        nodes. Built per key on first use: a solve asks about a few keys (zone, hostname), and
        building all ~50 for hundreds of nodes was most of a disruption simulation's cost."""
        return _Universe(self.indexes, self.slots.base)

    def _register(self, st: PodState) -> None:
        self.topology.register(
            st.index,
            st.pod,
            spread=st.spread,
            affinity=st.affinity_terms,
            anti_affinity=st.anti_affinity_terms,
            node_terms=st.node_selector_terms(),
            tolerations=st.tolerations,
        )

    # ------------------------------------------------------------------ the loop
    def run(self) -> Plan:
        respect = self.inp.options.preference_policy == "Respect"
        states: list[PodState] = []
        errors: dict[int, str] = {}
        volume_errors = self.inp.volume_errors
        volume_requirements = self.inp.volume_requirements
        for i, pod in enumerate(self.inp.pods):
            st = PodState.of(pod, i, respect_preferences=respect, cache=self.cache)
            why = unsupported_reason(pod)
            if why is None and volume_errors:
                why = volume_errors.get(pod.key)
            if why is not None:
                errors[i] = why
                continue
            if volume_requirements:
                alternatives = volume_requirements.get(pod.key)
                if alternatives:
                    self.volumes[i] = self._volume_requirements(alternatives)
            states.append(st)
            self._register(st)
        states.sort(key=_pod_order)
        unplaced = self._place_all(self._fill_existing(states), errors)
        if self.inp.options.repack:
            self._repack(states)
        return self._plan(unplaced, errors)

    def _fill_existing(self, states: list[PodState]) -> list[PodState]:
        """While some existing capacity is not initialised yet (NodeClaims in flight, nodes
        coming up), fill it as a whole (``scheduling.fill``) with the pods that may go anywhere
        alike (no volumes, host ports or topology group), when that places more than first fit
        would. Those pods are placed for real here, through ``try_add``; the others (and any
        the plan could not place after all) are returned, in order, for the loop."""
        if len(states) < 2 or all(self.slots.base.initialized):
            return states
        movable = [st for st in states if self._fills(st)]
        if len(movable) < 2:
            return states
        names = sorted({n for st in movable for n in st.pod.requests})
        classes: dict[tuple[tuple[object, ...], Vector], list[PodState]] = {}
        for st in movable:
            vec = tuple(st.pod.requests.get(n, 0) for n in names)
            classes.setdefault((st.signature, vec), []).append(st)
        groups = list(classes.values())
        vecs = [vec for _, vec in classes]
        bins, at, room = self._fill_bins(names, groups, vecs)
        if not bins:
            return states
        value = [worth(g[0].pod.requests, self.indexes, room) for g in groups]
        takes = plan_fill([len(g) for g in groups], vecs, value, bins)
        if takes is None:
            return states
        placed = self._place_fill(at, takes, groups)
        return [st for st in states if st.index not in placed]

    def _fill_bins(
        self, names: Sequence[str], groups: Sequence[Sequence[PodState]], vecs: Sequence[Vector]
    ) -> tuple[list[Bin], list[int], dict[str, int]]:
        """The existing slots some class fits (as bins, in slot order), their slot indexes, and
        their total room."""
        smallest = tuple(min(v[r] for v in vecs) for r in range(len(names)))
        bins: list[Bin] = []
        at: list[int] = []
        total: dict[str, int] = {}
        for i, parts in enumerate(self.slots.base.parts):
            room = tuple(parts.remaining.get(n, 0) for n in names)
            if any(free < least for free, least in zip(room, smallest, strict=True)):
                continue
            allowed = frozenset(c for c, g in enumerate(groups) if _may_go(parts, g[0]))
            if allowed:
                bins.append(Bin(room, allowed))
                at.append(i)
                for n, free in zip(names, room, strict=True):
                    total[n] = total.get(n, 0) + free
        return bins, at, total

    def _place_fill(
        self,
        at: Sequence[int],
        takes: Sequence[Sequence[int]],
        groups: Sequence[Sequence[PodState]],
    ) -> set[int]:
        """Place the planned fill for real, slot by slot; the indexes of the pods placed."""
        queues = [deque(g) for g in groups]
        placed: set[int] = set()
        for i, take in zip(at, takes, strict=True):
            slot = self.slots[i]
            for c, k in enumerate(take):
                for _ in range(k):
                    st = queues[c][0]
                    if slot.try_add(st, self.topology, st.signature) is not None:
                        break  # the loop places it
                    queues[c].popleft()
                    placed.add(st.index)
            self.slots.update(i)
        return placed

    def _fills(self, st: PodState) -> bool:
        """Whether ``_fill_existing`` may place the pod: nothing but room, labels and taints
        decides where it goes."""
        if st.index in self.volumes or st.pod.host_ports:
            return False
        return self.topology.keys_involving(st.index, st.pod) == frozenset()

    def _repack(self, order: list[PodState]) -> None:
        """Re-pack each pool's new claims (``scheduling.packing``). A pod can move when it has
        no volumes and every topology group involving it is keyed on a domain (zone, capacity
        type, ...) its claim is pinned to, which it keeps. A claim whose pods all move is
        replaced; one where some stay is rebuilt with those (same hostname and requirements).
        The pool's claims change only where that is cheaper and fits the pool's limits."""
        pins: dict[int, Requirements] = {}
        per_pool: dict[PoolIndex, list[tuple[NewClaim, list[PodState], list[PodState]]]] = {}
        for claim in self.claims:
            # The packing step's claims count no reservation: leave reserving pools' as built.
            if claim.min_values_relaxed or claim.ledger is not None:
                continue
            moving: list[PodState] = []
            staying: list[PodState] = []
            for st in claim.pods:
                pinned = self._pins(st, claim)
                if pinned is None:
                    staying.append(st)
                else:
                    moving.append(st)
                    if pinned:
                        pins[st.index] = pinned
            if moving:
                per_pool.setdefault(claim.index, []).append((claim, moving, staying))
        position = {st.index: n for n, st in enumerate(order)}
        names = (f"hostname-placeholder-{n:05d}" for n in itertools.count(len(self.claims)))
        replaced: dict[NewClaim, list[NewClaim]] = {}
        for idx, parts in per_pool.items():
            done = self._repack_pool(idx, parts, pins, position, names)
            if done is not None:
                replaced.update(done)
        if replaced:
            self.claims = [n for c in self.claims for n in replaced.get(c, [c])]

    def _repack_pool(
        self,
        idx: PoolIndex,
        parts: list[tuple[NewClaim, list[PodState], list[PodState]]],
        pins: Mapping[int, Requirements],
        position: Mapping[int, int],
        names: Iterator[str],
    ) -> dict[NewClaim, list[NewClaim]] | None:
        """Old claim -> what replaces it, when the pool's re-pack is cheaper and within limits."""
        old: list[NewClaim] = []
        kept: dict[NewClaim, NewClaim] = {}  # a claim some pods stay on -> it rebuilt
        moving: list[PodState] = []
        for claim, leaving, staying in parts:
            if staying:
                rebuilt = rebuild(claim, staying)
                if rebuilt is None:
                    continue
                kept[claim] = rebuilt
            old.append(claim)
            moving.extend(leaving)
        rebuilt_claims = list(kept.values())
        max_claims = None if self.inp.options.repack_split else len(old) - len(rebuilt_claims)
        if not moving or (max_claims == 1 and not rebuilt_claims):
            # One claim holding them all is what greedy built: its cheapest type is the answer.
            return None
        baseline = sum(claim_price(c) for c in old) - sum(claim_price(c) for c in rebuilt_claims)
        done = repack(
            idx,
            sorted(moving, key=lambda st: position[st.index]),
            baseline=baseline,
            pins=pins,
            hostnames=names,
            relax_min_values=self.inp.options.min_values_policy == "BestEffort",
            max_claims=max_claims,
        )
        if done is None or not self._recharge(idx, old, [*done, *rebuilt_claims]):
            return None
        out = {c: [kept[c]] if c in kept else [] for c in old}
        out[old[0]] = [*out[old[0]], *done]
        return out

    def _pins(self, st: PodState, claim: NewClaim) -> Requirements | None:
        """The domains the pod must stay within to move (empty when none matter), or None when
        it cannot move: it has volumes, a hostname-keyed group involves it, or its claim leaves
        a key that matters open."""
        if st.index in self.volumes:
            return None
        keys = self.topology.keys_involving(st.index, st.pod)
        if keys is None or LABEL_HOSTNAME in keys:
            return None
        pinned: dict[str, Req] = {}
        for key in keys:
            # The claim's domains of the key: one the groups counted it in, or several (then no
            # group counted it, as the node may land in any), which the pod must stay within.
            held = claim.requirements.get(key)
            if held is None or held.complement or not held.values:
                return None
            pinned[key] = held
        return Requirements(pinned)

    def _recharge(self, idx: PoolIndex, old: list[NewClaim], new: list[NewClaim]) -> bool:
        """Swap the old claims' charge against the pool's limits for the new ones', if it fits."""
        remaining = self.limits.get(idx.pool.name)
        if remaining is None:
            return True
        after = dict(remaining)
        for claim in old:
            for name, amount in self.charged.get(claim, {}).items():
                after[name] += amount
        charges = {claim: _charge(idx, claim.mask, after) for claim in new}
        for charge in charges.values():
            for name, amount in charge.items():
                after[name] -= amount
        if any(v < 0 for v in after.values()):
            return False
        remaining.update(after)
        for claim in old:
            self.charged.pop(claim, None)
        self.charged.update(charges)
        return True

    def _place_all(self, states: list[PodState], errors: dict[int, str]) -> list[PodState]:
        queue = deque(states)
        last_seen: dict[int, int] = {}
        while queue:
            st = queue[0]
            if last_seen.get(st.index) == len(queue):
                break  # a full pass without progress
            queue.popleft()
            why = self._add(st)
            if why is None:
                errors.pop(st.index, None)
                continue
            errors[st.index] = why
            queue.append(st)
            if st.relax(may_tolerate_prefer_no_schedule=self.prefer_no_schedule):
                self._register(st)
                last_seen.clear()
            else:
                last_seen[st.index] = len(queue)
        return list(queue)

    def _volume_requirements(self, alternatives: VolumeAlternatives) -> tuple[Requirements, ...]:
        """Alternatives as Requirements, shared by every pod that has the same ones."""
        cached = self._volume_cache.get(alternatives)
        if cached is None:
            cached = tuple(Requirements.from_selectors(alt) for alt in alternatives)
            self._volume_cache[alternatives] = cached
        return cached

    def _add(self, st: PodState) -> str | None:
        volumes = self.volumes.get(st.index, ()) if self.volumes else ()
        # Volumes decide fits too, so two pods alike but for them must not share refusals.
        sig = (*st.signature, volumes) if volumes else st.signature
        requests = st.pod.requests
        pre = self.topology.prefilter(st.index, st.pod, st.strict_requirements)
        check = bool(pre.hostnames or pre.domains)
        # Resume where an earlier pod alike under the same filters left off: every slot before
        # that point refused such a pod for good (see ``resume``).
        key = (sig, pre.shape) if check else sig
        live: int | None = None  # the first slot seen that may still take a pod alike
        slots = self.slots
        names = slots.base.names
        start = self.resume.get(key, 0)
        # The domain filters pick slots from the base's per-domain lists; hostnames are checked
        # one by one (their counts change as pods land).
        hosts = pre.hostnames
        for i in (
            slots.within(pre.domains, requests, start)
            if pre.domains
            else slots.candidates(requests, start)
        ):
            if hosts and pre.rules_out_host(names[i]):
                continue
            slot = slots[i]
            if not slot.has_room(requests):
                continue
            if slot.try_add(st, self.topology, sig, volumes) is None:
                slots.update(i)
                self.resume[key] = i if live is None else live
                return None
            if live is None and not slot.refuses_for_good(sig):
                live = i  # topology refused it: that may change as pods land
        self.resume[key] = len(slots) if live is None else live
        for count in sorted(self.buckets):
            for claim in self.buckets[count]:
                if check and pre.rules_out(claim.hostname, claim.requirements):
                    continue
                if (
                    not claim.has_room(requests)
                    or claim.try_add(st, self.topology, sig, volumes) is not None
                ):
                    continue
                # Mutating the buckets is safe: we return before iterating again.
                del self.buckets[count][claim]
                if not self.buckets[count]:
                    del self.buckets[count]
                self.buckets.setdefault(count + 1, {})[claim] = None
                return None
        return self._new_claim(st, sig, volumes)

    def _new_claim(
        self, st: PodState, sig: tuple[object, ...], volumes: tuple[Requirements, ...]
    ) -> str | None:
        reasons = []
        for idx in self.indexes:
            name = idx.pool.name
            mask = idx.all
            remaining = self.limits.get(name)
            if remaining is not None:
                mask &= idx.limits_mask(remaining)
            if not mask:
                reasons.append(
                    f'nodepool "{name}": no instance types left within its limits'
                    if idx.all
                    else ""
                )
                continue
            claim = NewClaim(
                idx,
                f"hostname-placeholder-{len(self.claims):05d}",
                mask,
                relax_min_values=self.inp.options.min_values_policy == "BestEffort",
                ledger=self.ledgers.get(idx),
            )
            why = claim.try_add(st, self.topology, sig, volumes)
            if why is None:
                self.claims.append(claim)
                self.buckets.setdefault(1, {})[claim] = None
                if remaining is not None:
                    charge = _charge(idx, claim.mask, remaining)
                    for key, amount in charge.items():
                        remaining[key] -= amount
                    self.charged[claim] = charge
                return None
            reasons.append(f'nodepool "{name}": {why}')
        return "; ".join(r for r in reasons if r) or "no nodepools"

    # ------------------------------------------------------------------ results
    def _plan(self, unplaced: list[PodState], errors: dict[int, str]) -> Plan:
        new_claims = []
        for claim in self.claims:
            done = self._finalize(claim)
            if isinstance(done, str):
                for st in claim.pods:  # the claim cannot be launched: none of its pods are placed
                    errors[st.index] = done
                continue
            new_claims.append(done)
        existing = tuple(
            ExistingPlacement(s.name, tuple(p.pod for p in s.pods))
            for s in self.slots.made()
            if s.pods
        )
        failed = {st.index: st for st in unplaced}
        placed: set[int] = set()
        if any(i not in failed for i in errors):  # rare: rejected pods or dropped claims
            placed = {st.index for done in new_claims for st in done.states}
            placed.update(st.index for s in self.slots.made() for st in s.pods)
        pod_errors = []
        for i, pod in enumerate(self.inp.pods):
            if i in failed:
                pod_errors.append(
                    PodError(pod, diagnose(failed[i], self.indexes, self.limits, errors.get(i, "")))
                )
            elif i in errors and i not in placed:
                pod_errors.append(PodError(pod, errors[i]))
        return Plan(tuple(done.claim for done in new_claims), existing, tuple(pod_errors))

    def _finalize(self, claim: NewClaim) -> _Finalized | str:
        """The NodeClaim to launch, or why it cannot be (minValues after truncation)."""
        idx = claim.index
        reqs = claim.requirements.without(LABEL_HOSTNAME)
        held = claim.ledger.held.get(claim.hostname) if claim.ledger is not None else None
        if held:
            # As upstream: a claim holding reservations launches into one of them, never
            # beside them (their room was counted for it).
            reqs = reqs.replaced(Req.in_(RESERVATION_ID, held)).with_req(
                Req.in_(LABEL_CAPACITY_TYPE, (CAPACITY_TYPE_RESERVED,))
            )
        options = idx.cheapest_offerings(claim.mask, reqs)
        if not options:
            return f'nodepool "{idx.pool.name}": no instance type has an available offering left'
        relaxed = claim.min_values_relaxed
        limit = self.inp.options.max_instance_types
        kept = _truncate(options, reqs, idx, limit)
        if kept is None:
            if self.inp.options.min_values_policy != "BestEffort":
                return (
                    f'nodepool "{idx.pool.name}" could not meet its minValues requirements with '
                    f"at most {limit} instance types ({_min_values_summary(reqs)})"
                )
            kept = options[:limit]
            mask = 0
            for o in kept:
                mask |= 1 << o[2]
            reqs = relax_min_values(reqs, idx, mask)
            relaxed = True
        if len(kept) == len(options):
            chosen = claim.mask  # every type in it with an allowed offering is an option
        else:
            chosen = 0
            for o in kept:
                chosen |= 1 << o[2]
        options = kept
        _, _, best_i, best = options[0]
        best_type = idx.types[best_i]
        reqs = reqs.with_req(Req.in_(LABEL_INSTANCE_TYPE, (o[1] for o in options)))
        # As upstream's ToNodeClaim: only the capacity types the kept options can be bought as.
        reqs = reqs.with_req(Req.in_(LABEL_CAPACITY_TYPE, idx.capacity_types(chosen, reqs)))
        excluded = reqs.get(RESERVATION_ID)
        if excluded is not None and excluded.complement and not held:
            # Only full reservations were excluded, and the capacity types now leave reserved
            # out: the NotIn says nothing more to the provider.
            reqs = reqs.without(RESERVATION_ID)
        labels = dict(idx.pool.labels)
        labels.update(reqs.single_values())
        for key, values in best_type.requirements.items():
            if len(values) == 1:
                labels[key] = next(iter(values))
        labels.update(best.labels)
        labels.update(
            {
                LABEL_NODEPOOL: idx.pool.name,
                LABEL_TOPOLOGY_ZONE: best.zone,
                LABEL_CAPACITY_TYPE: best.capacity_type,
            }
        )
        labels[LABEL_INSTANCE_TYPE] = best_type.name
        overhead = _min_overhead(idx, [o[2] for o in options])
        requests = dict(claim.requests)
        for name, amount in overhead.items():
            requests[name] = requests.get(name, 0) + amount
        annotations = dict(idx.pool.annotations)
        annotations[ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] = "true" if relaxed else "false"
        return _Finalized(
            NewNodeClaim(
                node_pool=idx.pool.name,
                hostname=claim.hostname,
                instance_types=tuple(idx.types[o[2]] for o in options),
                requirements=reqs.to_selectors(),
                labels=labels,
                taints=idx.pool.taints,
                startup_taints=idx.pool.startup_taints,
                pods=tuple(p.pod for p in claim.pods),
                requests=requests,
                instance_type=best_type,
                offering=best,
                annotations=annotations,
            ),
            tuple(claim.pods),
        )


def _may_go(parts: SlotParts, st: PodState) -> bool:
    """Whether the node's taints and labels let the pod on (room aside)."""
    if untolerated(parts.taints, st.tolerations) is not None:
        return False
    return not st.requirements or compatible(parts.requirements, st.requirements) is None


def _charge(idx: PoolIndex, mask: int, remaining: Mapping[str, int]) -> Resources:
    """What a claim counts against its pool's limits: its largest option's capacity, for the
    launch may pick any of them."""
    return {name: 1 if name == "nodes" else idx.max_capacity(name, mask) for name in remaining}


class _Universe(Mapping[str, Mapping[str, Sequence[DomainSource]]]):
    """The solve's label universe (see ``_Solver._universe``), computed key by key."""

    def __init__(self, indexes: Sequence[PoolIndex], base: ExistingBase) -> None:
        self._indexes = indexes
        self._base = base
        self._built: dict[str, dict[str, list[DomainSource]]] = {}
        self._keys: list[str] | None = None

    def __getitem__(self, key: str) -> Mapping[str, Sequence[DomainSource]]:
        built = self._built.get(key)
        if built is None:
            built = self._build(key)
            if not built:
                raise KeyError(key)
        return built

    def _build(self, key: str) -> dict[str, list[DomainSource]]:
        values: dict[str, list[DomainSource]] = {}
        for idx in self._indexes:
            source = DomainSource(idx.requirements, idx.taints)
            req = idx.requirements.get(key)
            for value in idx.label_values(key):
                if req is None or req.has(value):
                    values.setdefault(value, []).append(source)
            if req is not None and not req.complement:
                for value in req.values:
                    values.setdefault(value, []).append(source)
        for value, sources in self._base.domains(key).items():
            values.setdefault(value, []).extend(sources)
        self._built[key] = values
        return values

    def _all_keys(self) -> list[str]:
        if self._keys is None:
            keys: dict[str, None] = {}
            for idx in self._indexes:
                keys.update(dict.fromkeys(idx.label_keys()))
                keys.update(dict.fromkeys(idx.requirements))
            keys.update(dict.fromkeys(self._base.label_keys()))
            self._keys = [k for k in keys if self.get(k)]
        return self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._all_keys())

    def __len__(self) -> int:
        return len(self._all_keys())


@dataclass(frozen=True, slots=True)
class _Finalized:
    claim: NewNodeClaim
    states: tuple[PodState, ...]


_Option = tuple[float, str, int, Offering]


def _truncate(
    options: list[_Option], reqs: Requirements, idx: PoolIndex, limit: int
) -> list[_Option] | None:
    """At most ``limit`` options, cheapest first, still meeting every minValues; None if no such set.

    Upstream keeps the ``limit`` cheapest and fails when they miss a minValues; here the cheapest
    option of each needed value is taken first and the rest filled by price, so a claim only fails
    when no ``limit`` types can offer enough distinct values.
    """
    if len(options) <= limit:
        return options
    kept = options[:limit]
    wanted = [(key, req) for key, req in reqs.items() if req.min_values is not None]
    if not wanted or _meets_min_values(kept, wanted, idx):
        return kept
    chosen: dict[int, _Option] = {}
    for key, req in wanted:
        seen = {v for i in chosen for v in _type_values(idx, i, key) if req.has(v)}
        for o in options:
            if len(seen) >= (req.min_values or 0):
                break
            new = {v for v in _type_values(idx, o[2], key) if req.has(v)} - seen
            if new:
                chosen[o[2]] = o
                seen |= new
    if len(chosen) > limit:
        return None
    for o in options:
        if len(chosen) >= limit:
            break
        chosen.setdefault(o[2], o)
    kept = sorted(chosen.values(), key=lambda o: (o[0], o[1]))
    return kept if _meets_min_values(kept, wanted, idx) else None


def _type_values(idx: PoolIndex, i: int, key: str) -> frozenset[str]:
    req = idx.type_reqs[i].get(key)
    return frozenset() if req is None else req.values


def _meets_min_values(
    options: list[_Option], wanted: list[tuple[str, Req]], idx: PoolIndex
) -> bool:
    mask = 0
    for o in options:
        mask |= 1 << o[2]
    return all(idx.distinct_values(key, req, mask) >= (req.min_values or 0) for key, req in wanted)


def _min_values_summary(reqs: Requirements) -> str:
    return ", ".join(
        f"{key} minValues {req.min_values}" for key, req in sorted(reqs.items()) if req.min_values
    )


def _min_overhead(idx: PoolIndex, chosen: Sequence[int]) -> Resources:
    """Daemonset overhead reserved on the NodeClaim: the smallest across its options."""
    if not idx.daemonsets:
        return {}
    mask = 0
    for i in chosen:
        mask |= 1 << i
    out: Resources | None = None
    # Types share a handful of distinct overheads: take the minimum over those, not each type.
    for ds, types in idx.daemon_groups:
        if types & mask:
            out = dict(ds) if out is None else {k: min(v, ds.get(k, 0)) for k, v in out.items()}
    return {k: v for k, v in (out or {}).items() if v}


def unsupported_reason(pod: Pod) -> str | None:
    """Pods Karpenter will not simulate, with the reason upstream gives."""
    for term in pod.required_node_terms:
        if term.has_match_fields:
            return "node affinity uses matchFields, which Karpenter does not support"
        for r in term.match_expressions:
            if r.key == LABEL_NODEPOOL and r.operator == "DoesNotExist":
                return "requires karpenter.sh/nodepool DoesNotExist: not for Karpenter to provision"
    if pod.resource_claims:
        return "pod has DRA resource claims, which are ignored (IGNORE_DRA_REQUESTS=true)"
    return None


class ExistingSlots:
    """A solve's existing slots, in first-fit order over an ``ExistingBase``. A slot is made
    (its room and ports copied from the base) the first time a pod is tried on it: a small
    round over 5,000 nodes touches a few. The slots are seen in blocks of ``BLOCK``, each
    knowing the most CPU and memory any of its slots has left, so a pod skips every block that
    cannot hold it; a block is re-measured when one of its slots takes a pod."""

    def __init__(self, base: ExistingBase) -> None:
        self.base = base
        self._made: dict[int, ExistingSlot] = {}
        self.cpu = list(base.cpu)
        self.memory = list(base.memory)

    def __len__(self) -> int:
        return len(self.base.names)

    def __getitem__(self, i: int) -> ExistingSlot:
        slot = self._made.get(i)
        if slot is None:
            parts = self.base.parts[i]
            slot = self._made[i] = ExistingSlot(
                name=self.base.names[i],
                requirements=parts.requirements,
                taints=parts.taints,
                remaining=dict(parts.remaining),
                ports=list(parts.ports),
                initialized=self.base.initialized[i],
            )
        return slot

    def made(self) -> list[ExistingSlot]:
        """The slots made so far, in order (only these can hold pods this solve placed)."""
        return [self._made[i] for i in sorted(self._made)]

    def _remaining(self, i: int) -> Mapping[str, int]:
        slot = self._made.get(i)
        return slot.remaining if slot is not None else self.base.parts[i].remaining

    def update(self, i: int) -> None:
        b = i // BLOCK
        rooms = [self._remaining(j) for j in range(b * BLOCK, min((b + 1) * BLOCK, len(self)))]
        self.cpu[b] = max(r.get(RESOURCE_CPU, 0) for r in rooms)
        self.memory[b] = max(r.get(RESOURCE_MEMORY, 0) for r in rooms)

    def within(
        self,
        domains: Sequence[tuple[str, frozenset[str]]],
        requests: Mapping[str, int],
        start: int = 0,
    ) -> Iterator[int]:
        """``candidates`` restricted to the slots in the allowed domains of each label key
        (``Prefilter.domains``): those of the first key from the base's list, the others by
        their value."""
        (key, allowed), *others = domains
        listed = self.base.allowed(key, allowed)
        checks = [(self.base.values(k), a) for k, a in others]
        cpu = requests.get(RESOURCE_CPU)
        memory = requests.get(RESOURCE_MEMORY)
        for i in listed[bisect_left(listed, start) :]:
            b = i // BLOCK
            if (cpu is not None and self.cpu[b] < cpu) or (
                memory is not None and self.memory[b] < memory
            ):
                continue
            if all(values[i] is None or values[i] in a for values, a in checks):
                yield i

    def candidates(self, requests: Mapping[str, int], start: int = 0) -> Iterator[int]:
        """The index of every slot from ``start`` on, in a block that might hold ``requests``,
        in order. A block is skipped only when each of its slots fails ``has_room`` on CPU or
        memory."""
        cpu = requests.get(RESOURCE_CPU)
        memory = requests.get(RESOURCE_MEMORY)
        end = len(self)
        for b in range(start // BLOCK, len(self.cpu)):
            if (cpu is not None and self.cpu[b] < cpu) or (
                memory is not None and self.memory[b] < memory
            ):
                continue
            yield from range(max(start, b * BLOCK), min((b + 1) * BLOCK, end))
