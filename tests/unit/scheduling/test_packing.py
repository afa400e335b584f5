"""The packing step (``scheduling.packing``), move by move: each case solves the same input with
``repack=False`` (upstream's greedy plan) and ``repack=True`` and names the exact plans.

Prices are on-demand only and hand-set so every expected cost can be worked out by hand.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from karpenter_py.model.core import Pod, SelectorRequirement
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.claims import NewClaim
from karpenter_py.scheduling.inputs import PoolTemplate, SolveInput, SolveOptions
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.packing import claim_price, merge_tail
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.podstate import PodState, RequirementsCache
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.scheduling.topology import Topology
from tests.unit.scheduling._helpers import HOSTNAME, ZONE, itype, pod, pool, spread, zone_counts

OD = ("on-demand",)
ONE_ZONE = ("zone-a",)
TWO_ZONES = ("zone-a", "zone-b")


def split_types(zones: tuple[str, ...] = ONE_ZONE) -> list[InstanceType]:
    """small holds one 3-cpu pod for $0.30; big holds two for $1.00: two smalls are cheaper."""
    return [
        itype("small", 4, 8, price=0.30, capacity_types=OD, zones=zones),
        itype("big", 8, 16, price=1.00, capacity_types=OD, zones=zones),
    ]


def shape_types() -> list[InstanceType]:
    """A compute type, a memory type and a dear balanced one that holds anything."""
    return [
        itype("c4", 4, 4, price=0.20, capacity_types=OD, zones=ONE_ZONE),
        itype("r2", 2, 16, price=0.25, capacity_types=OD, zones=ONE_ZONE),
        itype("m8", 8, 32, price=0.90, capacity_types=OD, zones=ONE_ZONE),
    ]


def three_cpu(n: int, **kw: Any) -> list[Pod]:
    return [pod(f"p{i}", "3", "1Gi", **kw) for i in range(n)]


HOST_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": HOSTNAME}
        ]
    }
}


@dataclass(frozen=True)
class Case:
    name: str
    pods: list[Pod]
    types: list[InstanceType]
    greedy_cost: float
    packed_cost: float
    # (instance type, pod names) of each packed claim, in plan order.
    packed: list[tuple[str, list[str]]]
    pools: list[PoolTemplate] = field(default_factory=lambda: [pool()])
    options: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "split: one big claim onto two cheaper smalls",
        three_cpu(2),
        split_types(),
        greedy_cost=1.00,
        packed_cost=0.60,
        packed=[("small", ["p0"]), ("small", ["p1"])],
    ),
    Case(
        # Greedy takes the cpu pods first and grows one claim to m8, then the memory pods
        # another: $1.80. By shape: two c4 for the cpu pods, two r2 for the memory pods.
        "shapes: compute pods on compute types, memory pods on memory types",
        [pod(f"cpu{i}", "2", "1Gi") for i in range(4)]
        + [pod(f"mem{i}", "500m", "6Gi") for i in range(4)],
        shape_types(),
        greedy_cost=1.80,
        packed_cost=0.90,
        packed=[
            ("c4", ["cpu0", "cpu1"]),
            ("c4", ["cpu2", "cpu3"]),
            ("r2", ["mem0", "mem1"]),
            ("r2", ["mem2", "mem3"]),
        ],
    ),
    Case(
        "refused: a split would break required hostname pod affinity",
        three_cpu(2, labels={"app": "x"}, affinity=HOST_AFFINITY),
        split_types(),
        greedy_cost=1.00,
        packed_cost=1.00,
        packed=[("big", ["p0", "p1"])],
    ),
    Case(
        # Each small may launch as big (both hold a 3-cpu pod): two claims count 16 cpu.
        "refused: the split claims' largest options exceed the NodePool's cpu limit",
        three_cpu(2),
        split_types(),
        pools=[pool(limits={"cpu": "10"})],
        greedy_cost=1.00,
        packed_cost=1.00,
        packed=[("big", ["p0", "p1"])],
    ),
    Case(
        "allowed: the same split within a limit of 16 cpu",
        three_cpu(2),
        split_types(),
        pools=[pool(limits={"cpu": "16"})],
        greedy_cost=1.00,
        packed_cost=0.60,
        packed=[("small", ["p0"]), ("small", ["p1"])],
    ),
    Case(
        "refused: repack_split=False (consolidation's what-ifs) forbids more claims",
        three_cpu(2),
        split_types(),
        options={"repack_split": False},
        greedy_cost=1.00,
        packed_cost=1.00,
        packed=[("big", ["p0", "p1"])],
    ),
    Case(
        "nothing cheaper: the greedy plan is kept as it is",
        three_cpu(3),
        [
            itype("small", 4, 8, price=0.30, capacity_types=OD, zones=ONE_ZONE),
            itype("big", 10, 16, price=0.50, capacity_types=OD, zones=ONE_ZONE),
        ],
        greedy_cost=0.50,
        packed_cost=0.50,
        packed=[("big", ["p0", "p1", "p2"])],
    ),
]


def _solve(case: Case, *, repack: bool) -> Plan:
    return _plan(case.pods, case.types, case.pools, repack=repack, **case.options)


def _plan(
    pods: list[Pod],
    types: list[InstanceType],
    pools: list[PoolTemplate] | None = None,
    *,
    repack: bool,
    **options: Any,
) -> Plan:
    pools = pools or [pool()]
    inp = SolveInput(
        pods=pods,
        pools=pools,
        instance_types={p.name: types for p in pools},
        options=SolveOptions(repack=repack, **options),
    )
    plan = solve(inp)
    assert not plan.errors, plan.errors
    return plan


def _claims(plan: Plan) -> list[tuple[str, list[str]]]:
    return [(nc.instance_type.name, sorted(p.name for p in nc.pods)) for nc in plan.new_node_claims]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_packing_moves(case: Case) -> None:
    greedy = _solve(case, repack=False)
    packed = _solve(case, repack=True)
    assert greedy.hourly_cost == pytest.approx(case.greedy_cost)
    assert packed.hourly_cost == pytest.approx(case.packed_cost)
    assert _claims(packed) == case.packed


def test_zone_spread_pods_move_only_within_their_zone() -> None:
    """Four 3-cpu pods spread over two zones (maxSkew 1): greedy puts two on a big node per
    zone ($2.00); the packing splits each zone's big onto two smalls in that zone ($1.20),
    so the zone counts, which the spread decided, are unchanged."""
    pods = three_cpu(4, labels={"app": "w"}, topologySpreadConstraints=[spread(ZONE, {"app": "w"})])
    greedy = _plan(pods, split_types(TWO_ZONES), repack=False)
    packed = _plan(pods, split_types(TWO_ZONES), repack=True)
    assert greedy.hourly_cost == pytest.approx(2.00)
    assert packed.hourly_cost == pytest.approx(1.20)
    assert zone_counts(packed) == zone_counts(greedy) == {"zone-a": 2, "zone-b": 2}
    zone_of = {p.name: _zones(nc) for nc in greedy.new_node_claims for p in nc.pods}
    for nc in packed.new_node_claims:
        assert all(zone_of[p.name] == _zones(nc) for p in nc.pods)
    assert [nc.instance_type.name for nc in packed.new_node_claims] == ["small"] * 4


def _zones(nc: NewNodeClaim) -> tuple[str, ...]:
    return next(tuple(r.values) for r in nc.requirements if r.key == ZONE)


def test_hostname_spread_pods_are_not_moved() -> None:
    """A hostname spread counts pods per node: moving one changes a count, so the claims stay."""
    pods = three_cpu(
        4, labels={"app": "h"}, topologySpreadConstraints=[spread(HOSTNAME, {"app": "h"}, skew=2)]
    )
    greedy = _plan(pods, split_types(), repack=False)
    packed = _plan(pods, split_types(), repack=True)
    assert _claims(packed) == _claims(greedy)
    assert packed.hourly_cost == greedy.hourly_cost


def test_min_values_hold_on_packed_claims() -> None:
    """A pool asking for two instance types per claim still gets them on every packed claim."""
    types = [
        *split_types(),
        itype("small2", 4, 8, price=0.31, capacity_types=OD, zones=ONE_ZONE),
        itype("big2", 8, 16, price=1.01, capacity_types=OD, zones=ONE_ZONE),
    ]
    requirement = SelectorRequirement("node.kubernetes.io/instance-type", "Exists", (), 2)
    pools = [pool(requirements=[requirement])]
    greedy = _plan(three_cpu(2), types, pools, repack=False)
    assert _claims(greedy) == [("big", ["p0", "p1"])]
    assert greedy.hourly_cost == pytest.approx(1.00)
    packed = _plan(three_cpu(2), types, pools, repack=True)
    assert packed.hourly_cost == pytest.approx(0.60)
    assert [sorted(t.name for t in nc.instance_types) for nc in packed.new_node_claims] == [
        ["big", "big2", "small", "small2"],
        ["big", "big2", "small", "small2"],
    ]


def _single_pod_claims(idx: PoolIndex, topology: Topology, names: Iterator[str]) -> list[NewClaim]:
    claims = []
    for i, p in enumerate(three_cpu(2)):
        st = PodState.of(p, i, respect_preferences=True, cache={})
        claim = NewClaim(idx, next(names), idx.all)
        assert claim.try_add(st, topology, st.signature) is None
        claims.append(claim)
    return claims


def test_merge_tail_puts_two_part_filled_claims_on_one_cheaper_node() -> None:
    """The merge move on its own: two claims of one 3-cpu pod each on smalls ($0.30 each);
    a big holding both costs $0.50, so they become one claim."""
    types = [
        itype("small", 4, 8, price=0.30, capacity_types=OD, zones=ONE_ZONE),
        itype("big", 8, 16, price=0.50, capacity_types=OD, zones=ONE_ZONE),
    ]
    idx = PoolIndex(pool(), types, ())
    topology = Topology(universe={}, placed=(), namespace_labels={})
    names = (f"h-{n}" for n in itertools.count())
    claims = _single_pod_claims(idx, topology, names)
    assert [claim_price(c) for c in claims] == [0.30, 0.30]
    merged = merge_tail(idx, claims, {}, topology, names, relax_min_values=False)
    assert len(merged) == 1
    assert claim_price(merged[0]) == 0.50
    assert sorted(st.pod.name for st in merged[0].pods) == ["p0", "p1"]


def test_merge_tail_keeps_claims_when_one_node_is_dearer() -> None:
    idx = PoolIndex(pool(), split_types(), ())  # big at $1.00 > two smalls at $0.60
    topology = Topology(universe={}, placed=(), namespace_labels={})
    names = (f"h-{n}" for n in itertools.count())
    claims = _single_pod_claims(idx, topology, names)
    assert merge_tail(idx, claims, {}, topology, names, relax_min_values=False) == claims


HOST_PORT: dict[str, Any] = {
    "containers": [{"name": "app", "ports": [{"containerPort": 80, "hostPort": 80}]}]
}

# (name, pods, added): NewClaim.try_add_all, which the packing step uses to place a pattern's
# pods of one class with one check. It adds all or nothing.
ALL_OR_NOTHING = [
    ("two alike pods go in with one commit, onto the type that holds both", three_cpu(2), True),
    ("their combined requests fit no type: none goes in", three_cpu(3), False),
    (
        "signatures differ (a toleration): one by one instead",
        [
            *three_cpu(1),
            pod(
                "tolerant",
                "3",
                "1Gi",
                tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            ),
        ],
        False,
    ),
    (
        "host ports: one by one instead",
        [pod(f"web{i}", "1", "1Gi", **HOST_PORT) for i in range(2)],
        False,
    ),
]


@pytest.mark.parametrize(
    ("pods", "added"), [c[1:] for c in ALL_OR_NOTHING], ids=[c[0] for c in ALL_OR_NOTHING]
)
def test_try_add_all_is_all_or_nothing(pods: list[Pod], added: bool) -> None:
    idx = PoolIndex(pool(), split_types(), ())
    topology = Topology(universe={}, placed=(), namespace_labels={})
    cache: RequirementsCache = {}  # one per solve: pods alike share their requirements
    states = [PodState.of(p, i, respect_preferences=True, cache=cache) for i, p in enumerate(pods)]
    claim = NewClaim(idx, "h-0", idx.all)
    assert claim.try_add_all(states, topology) is added
    if not added:
        assert (claim.pods, claim.requests, claim.version, claim.mask) == ([], {}, 0, idx.all)
        return
    # The same claim as adding them one by one, in one commit.
    one_by_one = NewClaim(idx, "h-0", idx.all)
    for st in states:
        assert one_by_one.try_add(st, topology, st.signature) is None
    assert claim.pods == one_by_one.pods
    assert (claim.requests, claim.mask, claim.requirements, claim.headroom) == (
        one_by_one.requests,
        one_by_one.mask,
        one_by_one.requirements,
        one_by_one.headroom,
    )
    assert [idx.types[i].name for i in range(len(idx.types)) if claim.mask >> i & 1] == ["big"]
    assert claim.version == 1
