"""Builders shared by the scheduling tests: instance types, pods, nodes, one-call solve, plan queries.

Pods are written the way users write them (Kubernetes JSON through ``pod_from_dict``), so the tests
also exercise parsing. Instance types are small and hand-priced so every expected choice can be
worked out by hand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from karpenter_py.model.core import Node, Pod, Taint
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    CAPACITY_TYPE_RESERVED,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.inputs import (
    ExistingNode,
    PoolTemplate,
    SolveInput,
    SolveOptions,
    pool_template,
)
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.scheduler import solve
from tests import factories

ZONE = LABEL_TOPOLOGY_ZONE
HOSTNAME = LABEL_HOSTNAME
CAPACITY_TYPE = LABEL_CAPACITY_TYPE
INSTANCE_TYPE = LABEL_INSTANCE_TYPE
NODEPOOL = LABEL_NODEPOOL
ARCH = LABEL_ARCH
OS = LABEL_OS
ZONES = ("zone-a", "zone-b", "zone-c")
GI = 2**30

__all__ = [
    "ARCH",
    "CAPACITY_TYPE",
    "GI",
    "HOSTNAME",
    "INSTANCE_TYPE",
    "NODEPOOL",
    "OS",
    "ZONE",
    "ZONES",
    "by_pod",
    "claim_of",
    "error_of",
    "existing",
    "itype",
    "make_node",
    "pod",
    "pool",
    "req_values",
    "run",
    "spread",
    "standard_types",
    "taint",
    "zone_counts",
]


def itype(
    name: str,
    cpu: float,
    mem_gi: float,
    *,
    price: float | None = None,
    spot_price: float | None = None,
    zones: Sequence[str] = ZONES,
    zone_prices: Mapping[str, float] | None = None,
    capacity_types: Sequence[str] = ("on-demand", "spot"),
    arch: str = "amd64",
    os: str = "linux",
    pods: int = 110,
    labels: Mapping[str, str | Iterable[str]] | None = None,
    extra: Mapping[str, int] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
    reservations: Iterable[tuple[str, str, int]] = (),
) -> InstanceType:
    """A type with on-demand (and spot, at 40 %) offerings in ``zones``, and a ``reserved`` one
    per (reservation id, zone, room) of ``reservations``, priced as the AWS provider prices them
    (on-demand / 10,000,000). No kube-reserved, so allocatable == capacity and sizes are easy to
    reason about."""
    od = price if price is not None else round(cpu * 0.04 + mem_gi * 0.005, 6)
    spot = spot_price if spot_price is not None else round(od * 0.4, 6)
    off = set(unavailable)
    offerings = []
    for zone in zones:
        base = zone_prices.get(zone, od) if zone_prices else od
        for ct in capacity_types:
            p = base if ct == "on-demand" else (spot if not zone_prices else round(base * 0.4, 6))
            offerings.append(
                Offering(zone=zone, capacity_type=ct, price=p, available=(zone, ct) not in off)
            )
    offerings.extend(
        Offering(
            zone=zone,
            capacity_type=CAPACITY_TYPE_RESERVED,
            price=od / 10_000_000,
            labels={AWS_LABEL_CAPACITY_RESERVATION_ID: rid},
            reservation_capacity=room,
        )
        for rid, zone, room in reservations
    )
    reqs: dict[str, Any] = {ARCH: arch, OS: os}
    for key, value in (labels or {}).items():
        reqs[key] = value if isinstance(value, str) else frozenset(value)
    capacity = {"cpu": int(cpu * 1000), "memory": int(mem_gi * GI), "pods": pods, **(extra or {})}
    return make_instance_type(name=name, requirements=reqs, capacity=capacity, offerings=offerings)


def standard_types() -> list[InstanceType]:
    """small (2 cpu / 4Gi), medium (4 / 8), large (8 / 16): price grows with size."""
    return [itype("small", 2, 4), itype("medium", 4, 8), itype("large", 8, 16)]


def pod(
    name: str,
    cpu: str | None = "100m",
    mem: str | None = "128Mi",
    *,
    ns: str = "default",
    labels: Mapping[str, str] | None = None,
    created: str = "",
    owner: str | None = None,
    **spec: Any,
) -> Pod:
    """A pod with one container, no owner (``owner`` names the kind of one, named as the pod) and
    no status (the scheduler sees only its spec); extra keyword arguments are Pod.spec fields
    (camelCase)."""
    return factories.pod(
        name,
        cpu=cpu,
        memory=mem,
        namespace=ns,
        labels=dict(labels or {}),
        created=created,
        owner=owner,
        owner_name=name,
        phase="",
        container="app",
        **spec,
    )


def spread(
    key: str,
    labels: Mapping[str, str],
    *,
    skew: int = 1,
    when: str = "DoNotSchedule",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(labels)},
        **extra,
    }


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> Taint:
    return Taint(key=key, effect=effect, value=value)


def pool(name: str = "default", **kwargs: Any) -> PoolTemplate:
    return pool_template(name=name, **kwargs)


def make_node(
    name: str,
    cpu: str = "4",
    mem: str = "8Gi",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    pods: str = "110",
) -> Node:
    return factories.node(
        name,
        labels=dict(labels or {}),
        allocatable={"cpu": cpu, "memory": mem, "pods": pods},
        taints=[dict(t) for t in taints],
    )


def existing(
    node: Node,
    pods: Sequence[Pod] = (),
    *,
    pool_name: str = "",
    initialized: bool = True,
    in_flight: bool = False,
) -> ExistingNode:
    bound = tuple(replace(p, node_name=node.name, phase="Running") for p in pods)
    return ExistingNode(
        node=node, pods=bound, node_pool=pool_name, initialized=initialized, in_flight=in_flight
    )


def run(
    pods: Sequence[Pod],
    *,
    pools: Sequence[PoolTemplate] | None = None,
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]] | None = None,
    existing: Sequence[ExistingNode] = (),
    daemonsets: Sequence[Pod] = (),
    policy: Literal["Respect", "Ignore"] = "Respect",
    min_values_policy: Literal["Strict", "BestEffort"] = "Strict",
    max_instance_types: int = 600,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Plan:
    pools = list(pools) if pools is not None else [pool()]
    if types is None:
        types = standard_types()
    per_pool = (
        {p.name: list(types.get(p.name, ())) for p in pools}
        if isinstance(types, Mapping)
        else {p.name: list(types) for p in pools}
    )
    inp = SolveInput(
        pods=list(pods),
        pools=pools,
        instance_types=per_pool,
        existing=list(existing),
        daemonsets=list(daemonsets),
        options=SolveOptions(
            preference_policy=policy,
            min_values_policy=min_values_policy,
            max_instance_types=max_instance_types,
        ),
    )
    return solve(inp, namespace_labels=namespace_labels)


# ----------------------------------------------------------------------------- plan queries


def by_pod(plan: Plan) -> dict[str, str]:
    """pod name -> where it went: ``claim-<i>`` (index into new_node_claims) or ``node/<name>``."""
    out: dict[str, str] = {}
    for i, nc in enumerate(plan.new_node_claims):
        for p in nc.pods:
            out[p.name] = f"claim-{i}"
    for placement in plan.existing:
        for p in placement.pods:
            out[p.name] = f"node/{placement.node_name}"
    return out


def claim_of(plan: Plan, pod_name: str) -> NewNodeClaim:
    for nc in plan.new_node_claims:
        if any(p.name == pod_name for p in nc.pods):
            return nc
    raise AssertionError(f"{pod_name} is on no new NodeClaim; errors: {errors(plan)}")


def errors(plan: Plan) -> dict[str, str]:
    return {e.pod.name: e.reason for e in plan.errors}


def error_of(plan: Plan, pod_name: str) -> str:
    errs = errors(plan)
    assert pod_name in errs, f"{pod_name} was placed: {by_pod(plan)}"
    return errs[pod_name]


def req_values(nc: NewNodeClaim, key: str) -> tuple[str, ...] | None:
    """The values of the claim's In requirement on ``key`` (None when there is none)."""
    for r in nc.requirements:
        if r.key == key:
            assert r.operator == "In", r
            return tuple(sorted(r.values))
    return None


def zone_counts(plan: Plan, key: str = ZONE) -> Counter[str]:
    """Pods per domain of ``key`` over the new NodeClaims; each claim must be pinned to one domain."""
    counts: Counter[str] = Counter()
    for nc in plan.new_node_claims:
        values = req_values(nc, key)
        assert values is not None, f"no requirement on {key}: {nc.requirements}"
        assert len(values) == 1, f"claim not pinned on {key}: {nc.requirements}"
        counts[values[0]] += len(nc.pods)
    return counts
