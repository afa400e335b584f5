"""An independent validity check of a ``Plan`` against the ``SolveInput`` it was solved from.

``violations(inp, plan)`` lists every rule the plan breaks, in words (empty when it is valid), so a
test asserts ``== []`` and a failure says what went wrong. It re-checks the result from the
outside, not by replaying the solver: capacity and DaemonSet overhead come from ``PoolIndex``
(``effective`` / ``fit_mask``, the one home of that arithmetic), requirements from
``scheduling.requirements``, taints and host ports from their modules; the rest is counted here.

What it checks exactly:

- every input pod is placed exactly once (a new NodeClaim or an existing node) or has an error,
  never both;
- per new NodeClaim: its options are the pool's types, cheapest first, each holds the pods'
  requests plus the DaemonSets that type runs (and, for a pool without limits and below the
  truncation, every type that could launch the claim is one), is compatible with the claim's requirements and
  has an available offering they allow; ``instance_type``/``offering`` is the cheapest such
  option/offering and the zone/capacity-type labels are the offering's; ``requests`` is the pods'
  sum plus the smallest overhead across the options;
- every pod's nodeSelector and required node affinity (any term) holds on every node the claim
  may launch as (each option, its labels narrowed by the claim's requirements), and it tolerates
  the pool's taints;
- host ports do not clash on a claim (pods with each other and with the DaemonSets of every
  option);
- each NodePool's limits hold: usage plus, per claim, its largest option's capacity;
- pods placed on existing nodes: within what the node has left after its bound pods, its labels
  satisfy their node requirements, they tolerate its taints, no host-port clash;
- minValues: each requirement that has one sees that many distinct values of its key among the
  claim's options (unless the claim is annotated as relaxed);
- required hostname anti-affinity: no pod shares a node with a pod its term selects;
- required pod affinity on zone: in every zone the pod's node may land in, a pod the term
  selects is (not checked for a term that selects the pod itself: it may start the group);
- DoNotSchedule zone spread: the pod's claim is pinned to one zone, and over the zones every
  NodePool offers (narrowed by the pod's own zone requirement) the matching placed pods' counts
  differ by at most maxSkew (existing nodes count by their zone label, with the pods bound
  to them).

Not checked: pod affinity on keys other than zone, anti-affinity on keys other than hostname,
spread on keys other than zone or with ScheduleAnyway / minDomains / node filters other than the
defaults, preferences (they may be relaxed), volumes, minValues on zone or capacity type. The spread
domains are read off the pools' offered zones, which is exact only when every pool the pod's node
affinity admits offers the same zones (the property tests build their inputs that way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpenter_py.model.core import Pod
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.hostports import conflict
from karpenter_py.scheduling.inputs import SolveInput
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.requirements import Req, Requirements
from karpenter_py.scheduling.taints import untolerated


def violations(inp: SolveInput, plan: Plan) -> list[str]:
    """Every rule ``plan`` breaks for ``inp`` (see the module docstring); [] when valid."""
    indexes = {
        p.name: PoolIndex(p, inp.instance_types.get(p.name, ()), inp.daemonsets) for p in inp.pools
    }
    out = _accounting(inp, plan)
    for nc in plan.new_node_claims:
        idx = indexes.get(nc.node_pool)
        if idx is None:
            out.append(f"{nc.hostname}: unknown nodepool {nc.node_pool!r}")
            continue
        out.extend(f"{nc.hostname}: {v}" for v in _claim(idx, nc, inp.options.max_instance_types))
        if idx.pool.limits is None and len(nc.instance_types) < inp.options.max_instance_types:
            out.extend(f"{nc.hostname}: {v}" for v in _complete(idx, nc))
    out.extend(_existing(inp, plan))
    out.extend(_limits(inp, plan, indexes))
    zones = _zones(inp, plan, indexes)
    out.extend(_zone_spread(zones))
    out.extend(_zone_affinity(zones))
    return out


def pod_requirements(pod: Pod) -> list[Requirements]:
    """The pod's node requirements, one alternative per required term (any may hold)."""
    base = Requirements.from_labels(pod.node_selector)
    terms = [
        base & Requirements.from_selectors(t.match_expressions) for t in pod.required_node_terms
    ]
    return terms or [base]


# ---------------------------------------------------------------------- pods


def _accounting(inp: SolveInput, plan: Plan) -> list[str]:
    where: Counter[int] = Counter()
    for nc in plan.new_node_claims:
        where.update(id(p) for p in nc.pods)
    for placement in plan.existing:
        where.update(id(p) for p in placement.pods)
    failed = Counter(id(e.pod) for e in plan.errors)
    out = []
    known = {id(p) for p in inp.pods}
    for pod in inp.pods:
        placed, errors = where[id(pod)], failed[id(pod)]
        if placed + errors != 1:
            out.append(f"pod {pod.key}: placed {placed} times, {errors} errors")
    strangers = (set(where) | set(failed)) - known
    if strangers:
        out.append(f"{len(strangers)} pods in the plan are not in the input")
    return out


# ---------------------------------------------------------------------- one claim


def _claim(idx: PoolIndex, nc: NewNodeClaim, max_types: int) -> list[str]:
    reqs = Requirements.from_selectors(nc.requirements)
    number = {it.name: i for i, it in enumerate(idx.types)}
    if not nc.instance_types:
        return ["no instance type options"]
    if len(nc.instance_types) > max_types:
        return [f"{len(nc.instance_types)} options, more than {max_types}"]
    unknown = [it.name for it in nc.instance_types if number.get(it.name) is None]
    if unknown:
        return [f"options {unknown} are not the pool's usable types"]
    options = [number[it.name] for it in nc.instance_types]
    out: list[str] = []
    total = _sum(p.requests for p in nc.pods)
    fits = idx.fit_mask(total)
    prices: list[float] = []
    for i in options:
        name = idx.types[i].name
        if not fits >> i & 1:
            room = dict(sorted(idx.effective[i].items()))
            out.append(
                f"option {name} ({room} after daemonsets) cannot hold {dict(sorted(total.items()))}"
            )
        clash = _requirement_clash(reqs, idx.type_reqs[i])
        if clash is not None:
            out.append(f"option {name} is incompatible with the claim: {clash}")
        offered = [o.price for o in idx.offerings[i] if _allows(reqs, o.zone, o.capacity_type)]
        if not offered:
            out.append(f"option {name} has no available offering the claim allows")
        prices.append(min(offered, default=float("inf")))
        for pod in nc.pods:
            if not any(_holds(reqs, idx.type_reqs[i], t) for t in pod_requirements(pod)):
                out.append(f"pod {pod.key}'s node requirements fail on option {name}")
    if prices != sorted(prices):
        out.append(f"options are not cheapest first: {prices}")
    out.extend(_chosen(nc, reqs, min(prices)))
    out.extend(_min_values(nc))
    overhead = _min_overhead(idx, options)
    if dict(nc.requests) != {k: v for k, v in _sum([total, overhead]).items() if v}:
        out.append(f"requests {dict(nc.requests)} != pods {total} + overhead {overhead}")
    for pod in nc.pods:
        taint = untolerated(nc.taints, pod.tolerations)
        if taint is not None:
            out.append(f"pod {pod.key} does not tolerate {taint}")
    out.extend(_ports(idx, nc, options))
    out.extend(_anti_affinity(nc.hostname, nc.pods))
    return out


def _complete(idx: PoolIndex, nc: NewNodeClaim) -> list[str]:
    """Every type of the pool that could launch this claim is an option: it holds the pods with
    its DaemonSets, its labels meet the claim's requirements (but the instance-type list itself),
    it has an allowed offering, and no DaemonSet of it takes a pod's host port. (Only without
    limits, which drop types, and below the truncation to ``max_instance_types``.)"""
    reqs = Requirements.from_selectors(nc.requirements).without(LABEL_INSTANCE_TYPE)
    fits = idx.fit_mask(_sum(p.requests for p in nc.pods))
    ports = [hp for p in nc.pods for hp in p.host_ports]
    could = [
        it.name
        for i, it in enumerate(idx.types)
        if fits >> i & 1
        and _requirement_clash(reqs, idx.type_reqs[i].without(LABEL_INSTANCE_TYPE)) is None
        and any(_allows(reqs, o.zone, o.capacity_type) for o in idx.offerings[i])
        and conflict(idx.daemon_ports[i], ports) is None
    ]
    have = {it.name for it in nc.instance_types}
    left_out = [name for name in could if name not in have]
    return [f"types {left_out} could launch it but are not options"] if left_out else []


def _chosen(nc: NewNodeClaim, reqs: Requirements, cheapest: float) -> list[str]:
    out = []
    o = nc.offering
    if nc.instance_type not in nc.instance_types:
        out.append(f"instance_type {nc.instance_type.name} is not among the options")
    if o not in nc.instance_type.offerings or not o.available:
        out.append(f"offering {o} is not an available offering of {nc.instance_type.name}")
    if not _allows(reqs, o.zone, o.capacity_type):
        out.append(f"offering {o.zone}/{o.capacity_type} is not allowed by the claim")
    if o.price != cheapest:
        out.append(f"launch price {o.price} is not the cheapest option's {cheapest}")
    if nc.labels.get(LABEL_TOPOLOGY_ZONE) != o.zone:
        out.append(f"zone label {nc.labels.get(LABEL_TOPOLOGY_ZONE)} != offering's {o.zone}")
    if nc.labels.get(LABEL_CAPACITY_TYPE) != o.capacity_type:
        out.append(f"capacity-type label != offering's {o.capacity_type}")
    return out


def _min_values(nc: NewNodeClaim) -> list[str]:
    """Each requirement with minValues sees that many distinct values of its key (an instance-type
    label) among the options, unless the claim says minValues was relaxed."""
    if nc.annotations.get(ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED) == "true":
        return []
    out = []
    for r in nc.requirements:
        if not r.min_values or r.key in (LABEL_TOPOLOGY_ZONE, LABEL_CAPACITY_TYPE):
            continue
        req = Req.from_selector(r)
        seen = {v for it in nc.instance_types for v in it.requirements.get(r.key, ()) if req.has(v)}
        if len(seen) < r.min_values:
            out.append(f"{r.key} minValues {r.min_values}, options give {sorted(seen)}")
    return out


def _allows(reqs: Mapping[str, Req], zone: str, capacity_type: str) -> bool:
    z, ct = reqs.get(LABEL_TOPOLOGY_ZONE), reqs.get(LABEL_CAPACITY_TYPE)
    return (z is None or z.has(zone)) and (ct is None or ct.has(capacity_type))


def _requirement_clash(claim: Requirements, option: Requirements) -> str | None:
    for key, req in option.items():
        held = claim.get(key)
        if held is not None and not any(held.has(v) for v in req.values):
            return f"{held} excludes {req}"
    return None


def _holds(claim: Requirements, option: Requirements, pod: Requirements) -> bool:
    """Whether every node this option can launch as under the claim's requirements satisfies
    ``pod``: on each key, the values it may carry are within what the pod allows."""
    for key, want in pod.items():
        node = _node_values(claim.get(key), option.get(key))
        if node is None:  # the node will not have the label
            if want.operator() not in ("NotIn", "DoesNotExist"):
                return False
            continue
        if not _within(node, want):
            return False
    return True


def _node_values(claim: Req | None, option: Req | None) -> Req | None:
    if claim is None:
        return option
    return claim if option is None else claim.intersect(option)


def _within(node: Req, want: Req) -> bool:
    """Every value ``node`` allows, ``want`` allows too (min_values aside)."""
    both = node.intersect(want)
    return (both.complement, both.values, both.gt, both.lt) == (
        node.complement,
        node.values,
        node.gt,
        node.lt,
    )


def _ports(idx: PoolIndex, nc: NewNodeClaim, options: Sequence[int]) -> list[str]:
    out = []
    for n, pod in enumerate(nc.pods):
        for other in nc.pods[n + 1 :]:
            hit = conflict(pod.host_ports, other.host_ports)
            if hit is not None:
                out.append(f"pods {pod.key} and {other.key} both use host port {hit.port}")
        for i in options:
            hit = conflict(idx.daemon_ports[i], pod.host_ports)
            if hit is not None:
                name = idx.types[i].name
                out.append(f"pod {pod.key}'s host port {hit.port} is a daemonset's on {name}")
    return out


def _anti_affinity(node: str, pods: Sequence[Pod]) -> list[str]:
    out = []
    for pod in pods:
        for term in pod.pod_anti_affinity:
            if term.topology_key != LABEL_HOSTNAME or term.label_selector is None:
                continue
            namespaces = term.namespaces or (pod.namespace,)
            for other in pods:
                if (
                    other is not pod
                    and other.namespace in namespaces
                    and term.label_selector.matches(other.labels)
                ):
                    out.append(f"{pod.key} shares {node} with {other.key}, which it repels")
    return out


def _min_overhead(idx: PoolIndex, options: Sequence[int]) -> dict[str, int]:
    """What the solver reserves for DaemonSets on a claim: the least across its options."""
    if not options:
        return {}
    names = {n for i in options for n in idx.daemon_requests[i]}
    return {n: min(idx.daemon_requests[i].get(n, 0) for i in options) for n in names}


def _sum(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for name, amount in part.items():
            out[name] = out.get(name, 0) + amount
    return out


# ---------------------------------------------------------------------- existing nodes


def _existing(inp: SolveInput, plan: Plan) -> list[str]:
    """Pods placed on existing nodes: within what the node has left after its bound pods, its
    labels satisfy them, they tolerate its taints, no host port or hostname anti-affinity clash
    (with each other or with the bound pods)."""
    nodes = {ex.node.name: ex for ex in inp.existing}
    out = []
    for placement in plan.existing:
        ex = nodes.get(placement.node_name)
        if ex is None:
            out.append(f"pods placed on unknown node {placement.node_name}")
            continue
        name = placement.node_name
        bound = [p for p in ex.pods if not p.is_terminal()]
        used = _sum(p.requests for p in (*bound, *placement.pods))
        over = {r: v for r, v in used.items() if v > ex.node.allocatable.get(r, 0)}
        if over:
            out.append(f"node {name}: {over} is over its allocatable")
        labels = Requirements.from_labels({LABEL_HOSTNAME: name, **ex.node.labels})
        for pod in placement.pods:
            if not any(_holds(labels, Requirements(), t) for t in pod_requirements(pod)):
                out.append(f"node {name}: labels fail pod {pod.key}'s node requirements")
            taint = untolerated(ex.node.taints, pod.tolerations)
            if taint is not None:
                out.append(f"node {name}: pod {pod.key} does not tolerate {taint}")
        everyone = (*bound, *placement.pods)
        new = {id(p) for p in placement.pods}
        for n, pod in enumerate(everyone):
            for other in everyone[n + 1 :]:
                hit = conflict(pod.host_ports, other.host_ports)
                if hit is not None and (id(pod) in new or id(other) in new):
                    out.append(
                        f"node {name}: {pod.key} and {other.key} both use host port {hit.port}"
                    )
        out.extend(_anti_affinity(name, everyone))
    return out


# ---------------------------------------------------------------------- across claims


def _limits(inp: SolveInput, plan: Plan, indexes: Mapping[str, PoolIndex]) -> list[str]:
    out = []
    for pool in inp.pools:
        if pool.limits is None:
            continue
        used = dict(pool.usage)
        for nc in plan.new_node_claims:
            if nc.node_pool != pool.name:
                continue
            for name in pool.limits:
                largest = max(
                    1 if name == "nodes" else it.capacity.get(name, 0) for it in nc.instance_types
                )
                used[name] = used.get(name, 0) + largest
        over = {n: used.get(n, 0) for n, cap in pool.limits.items() if used.get(n, 0) > cap}
        if over:
            out.append(f"nodepool {pool.name}: {over} exceeds its limits {dict(pool.limits)}")
    return out


@dataclass(frozen=True)
class _Zones:
    """Where pods are, by zone: per placed or bound pod (by id) the zones its node may be in (one
    when it is pinned), the pods the plan placed, and every pod that counts in a domain."""

    of: dict[int, frozenset[str]]
    placed: list[Pod]
    counted: list[Pod]
    offered: frozenset[str]

    def single(self, pod: Pod) -> str | None:
        zones = self.of[id(pod)]
        return next(iter(zones)) if len(zones) == 1 else None


def _zones(inp: SolveInput, plan: Plan, indexes: Mapping[str, PoolIndex]) -> _Zones:
    labelled = {ex.node.name: ex.node.labels.get(LABEL_TOPOLOGY_ZONE) for ex in inp.existing}
    offered = {z for idx in indexes.values() for z in idx.label_values(LABEL_TOPOLOGY_ZONE)}
    offered.update(z for z in labelled.values() if z is not None)
    zone_of: dict[int, frozenset[str]] = {}
    placed: list[Pod] = []
    for nc in plan.new_node_claims:
        req = Requirements.from_selectors(nc.requirements).get(LABEL_TOPOLOGY_ZONE)
        zones = frozenset(z for z in offered if req is None or req.has(z))
        for p in nc.pods:
            zone_of[id(p)] = zones
            placed.append(p)
    counted = list(placed)  # pods that count in the domains: placed ones and those bound before
    for ex in inp.existing:
        for p in ex.pods:
            zone = labelled[ex.node.name]
            zone_of[id(p)] = frozenset(() if zone is None else (zone,))
            counted.append(p)
    for placement in plan.existing:
        zone = labelled.get(placement.node_name)
        for p in placement.pods:
            zone_of[id(p)] = frozenset(() if zone is None else (zone,))
            placed.append(p)
            counted.append(p)
    return _Zones(zone_of, placed, counted, frozenset(offered))


def _zone_spread(zones: _Zones) -> list[str]:
    out = []
    for pod in zones.placed:
        for c in pod.topology_spread:
            if (
                c.topology_key != LABEL_TOPOLOGY_ZONE
                or c.when_unsatisfiable != "DoNotSchedule"
                or c.label_selector is None
            ):
                continue
            if zones.single(pod) is None:
                out.append(f"pod {pod.key} has a zone spread but its node is not pinned to a zone")
                continue
            domains = {
                z for z in zones.offered if any(_zone_ok(t, z) for t in pod_requirements(pod))
            }
            counts = Counter(
                zones.single(q)
                for q in zones.counted
                if q.namespace == pod.namespace and c.label_selector.matches(q.labels)
            )
            per_zone = {z: counts.get(z, 0) for z in sorted(domains)}
            if per_zone and max(per_zone.values()) - min(per_zone.values()) > c.max_skew:
                out.append(f"pod {pod.key}: zone counts {per_zone} skew more than {c.max_skew}")
    return sorted(set(out))


def _zone_affinity(zones: _Zones) -> list[str]:
    """Required pod affinity on zone: in every zone the pod's node may be in, a pod the term
    selects is pinned (a pod its own term selects may start the group anywhere, so those are
    not checked)."""
    out = []
    for pod in zones.placed:
        for term in pod.pod_affinity:
            selector = term.label_selector
            if term.topology_key != LABEL_TOPOLOGY_ZONE or selector is None:
                continue
            if selector.matches(pod.labels):
                continue
            namespaces = term.namespaces or (pod.namespace,)
            held = {
                zones.single(q)
                for q in zones.counted
                if q.namespace in namespaces and selector.matches(q.labels)
            }
            missing = sorted(zones.of[id(pod)] - held)
            if missing or not zones.of[id(pod)]:
                out.append(
                    f"pod {pod.key} may be in zones {missing} with no pod its affinity selects"
                )
    return out


def _zone_ok(pod: Requirements, zone: str) -> bool:
    req = pod.get(LABEL_TOPOLOGY_ZONE)
    return req is None or req.has(zone)
