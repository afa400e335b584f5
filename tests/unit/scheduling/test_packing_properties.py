"""Property tests of the packing step (``scheduling.packing``) on random small workloads.

Each example builds a small catalog (types of different cpu:memory ratios and prices, two zones,
on-demand and spot offerings), one or two NodePools (optional limits, minValues, an optional
tainted pool), optional DaemonSets and existing nodes, and a few groups of alike pods (random
requests, optional nodeSelector / node affinity, host port, DoNotSchedule zone spread, hostname
anti-affinity, zone pod affinity to another group, toleration), then solves it greedily
(``SolveOptions(repack=False)``) and with the packing step, and checks:

- both plans are valid (``planchecks.violations``) and place the same pods (also on larger
  fleets of up to 80 pods, where the packing plans many alike nodes);
- the packed plan never costs more than the greedy one, and with ``repack_split=False`` has no
  more NodeClaims;
- solving the same input twice gives the same plan;
- on tiny topology-free cases, the packed cost is within a measured factor of the exact optimum
  (brute force over the partitions of the pods), and hand-worked tables reach it exactly.

Examples are derandomized, so CI runs the same cases every time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_py.model.core import HostPort, Pod, SelectorRequirement, pod_from_dict
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.inputs import ExistingNode, PoolTemplate, SolveInput, SolveOptions
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.plan import Plan
from karpenter_py.scheduling.scheduler import solve
from tests.unit.scheduling._helpers import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    itype,
    make_node,
    pod,
    pool,
    spread,
    taint,
)
from tests.unit.scheduling._helpers import existing as existing_node
from tests.unit.scheduling.planchecks import violations

ZONES_2: Final = ("zone-a", "zone-b")
MIN_TWO_TYPES: Final = SelectorRequirement(INSTANCE_TYPE, "Exists", (), 2)
TAINT_KEY: Final = "dedicated"
REL: Final = 1e-9  # float noise allowed when comparing plan costs


def examples(n: int) -> settings:
    """``n`` derandomized examples (the same every run), no per-example deadline."""
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,  # derandomized: nothing to replay, and nothing written beside the tests
        suppress_health_check=[HealthCheck.too_slow],
    )


# (name, cpu, memory GiB, on-demand $/h, arch): compute, general, memory-heavy, arm, tiny, big.
MENU: Final = (
    ("c4", 4, 8, 0.17, "amd64"),
    ("c8", 8, 16, 0.34, "amd64"),
    ("m2", 2, 8, 0.096, "amd64"),
    ("m4", 4, 16, 0.192, "amd64"),
    ("r2", 2, 16, 0.126, "amd64"),
    ("r4", 4, 32, 0.252, "amd64"),
    ("x16", 16, 32, 0.68, "amd64"),
    ("a4", 4, 8, 0.136, "arm64"),
    ("a8", 8, 32, 0.30, "arm64"),
    ("t1", 1, 2, 0.05, "amd64"),
)
CPUS: Final = ("250m", "500m", "1", "1500m", "2", "3")
MEMS: Final = ("512Mi", "1Gi", "2Gi", "3Gi", "6Gi", "12Gi")
# A pod's node constraint: nodeSelector {key: value}, or a required node-affinity expression.
SELECTORS: Final[tuple[dict[str, Any] | None, ...]] = (
    None,
    {"nodeSelector": {ZONE: "zone-a"}},
    {"nodeSelector": {ARCH: "amd64"}},
    {"nodeSelector": {ARCH: "arm64"}},
    {"nodeSelector": {CAPACITY_TYPE: "spot"}},
    {"nodeSelector": {CAPACITY_TYPE: "on-demand"}},
    {"affinity": {ARCH: ("NotIn", ["arm64"])}},
    {"affinity": {ZONE: ("In", ["zone-a", "zone-b"])}},
)


# ---------------------------------------------------------------------- building inputs


@dataclass(frozen=True)
class Group:
    """Pods alike in everything but name, as a Deployment makes them."""

    count: int
    cpu: str
    mem: str
    selector: dict[str, Any] | None = None
    port: int | None = None
    spread_skew: int | None = None
    anti: bool = False
    tolerate: bool = False
    affine: bool = False  # required pod affinity on zone to group g0's pods

    def pods(self, app: str) -> list[Pod]:
        return [self._pod(f"{app}-{n}", app) for n in range(self.count)]

    def _pod(self, name: str, app: str) -> Pod:
        container: dict[str, Any] = {
            "name": "app",
            "resources": {"requests": {"cpu": self.cpu, "memory": self.mem}},
        }
        if self.port is not None:
            container["ports"] = [{"containerPort": self.port, "hostPort": self.port}]
        spec: dict[str, Any] = {"containers": [container]}
        affinity: dict[str, Any] = {}
        if self.selector and "nodeSelector" in self.selector:
            spec["nodeSelector"] = dict(self.selector["nodeSelector"])
        if self.selector and "affinity" in self.selector:
            exprs = [
                {"key": k, "operator": op, "values": vals}
                for k, (op, vals) in self.selector["affinity"].items()
            ]
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": exprs}]
                }
            }
        if self.spread_skew is not None:
            spec["topologySpreadConstraints"] = [spread(ZONE, {"app": app}, skew=self.spread_skew)]
        if self.anti:
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
                ]
            }
        if self.affine and app != "g0":
            affinity["podAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "g0"}}, "topologyKey": ZONE}
                ]
            }
        if affinity:
            spec["affinity"] = affinity
        if self.tolerate:
            spec["tolerations"] = [
                {"key": TAINT_KEY, "operator": "Equal", "value": "team", "effect": "NoSchedule"}
            ]
        meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": app}}
        return pod_from_dict({"metadata": meta, "spec": spec})


@dataclass(frozen=True)
class Scenario:
    pods: tuple[Pod, ...]
    pools: tuple[PoolTemplate, ...]
    types: tuple[InstanceType, ...]
    daemonsets: tuple[Pod, ...] = ()
    existing: tuple[ExistingNode, ...] = ()

    def input(self, **options: Any) -> SolveInput:
        return SolveInput(
            pods=list(self.pods),
            pools=list(self.pools),
            instance_types={p.name: list(self.types) for p in self.pools},
            existing=list(self.existing),
            daemonsets=list(self.daemonsets),
            options=SolveOptions(**options),
        )


@st.composite
def catalogs(draw: st.DrawFn, *, most: int = 5) -> tuple[InstanceType, ...]:
    """A few menu types, each at a random price factor; spot at a random discount (or none),
    sometimes unavailable in zone-b. On-demand is offered in both zones, so every pool offers
    the same zones (what ``planchecks`` reads the spread domains from)."""
    chosen = draw(st.lists(st.sampled_from(MENU), min_size=2, max_size=most, unique=True))
    out = []
    for name, cpu, mem, price, arch in chosen:
        factor = draw(st.sampled_from((0.8, 1.0, 1.25)))
        spot = draw(st.sampled_from((None, 0.3, 0.6)))
        od = round(price * factor, 6)
        out.append(
            itype(
                name,
                cpu,
                mem,
                price=od,
                spot_price=None if spot is None else round(od * spot, 6),
                zones=ZONES_2,
                capacity_types=("on-demand",) if spot is None else ("on-demand", "spot"),
                arch=arch,
                unavailable=[("zone-b", "spot")] if draw(st.booleans()) else [],
            )
        )
    return tuple(out)


@st.composite
def groups(
    draw: st.DrawFn, *, constrained: bool = True, most: int = 5, per_node: bool = True
) -> Group:
    """Pods alike; ``per_node`` allows the constraints that take a node per pod (host ports,
    hostname anti-affinity)."""
    group = Group(
        count=draw(st.integers(1, most)),
        cpu=draw(st.sampled_from(CPUS)),
        mem=draw(st.sampled_from(MEMS)),
    )
    if not constrained:
        return group
    # Each constraint on a minority of groups, so most examples leave pods free to move.
    return replace(
        group,
        selector=draw(st.sampled_from(SELECTORS) | st.none()),
        port=draw(st.sampled_from((None,) * 6 + (8080, 9100))) if per_node else None,
        spread_skew=draw(st.sampled_from((None,) * 5 + (1, 2))),
        anti=draw(st.sampled_from((False,) * 7 + (True,))) if per_node else False,
        tolerate=draw(st.booleans()),
        affine=draw(st.sampled_from((False,) * 5 + (True,))),
    )


@st.composite
def daemonsets(draw: st.DrawFn) -> tuple[Pod, ...]:
    out = []
    for n in range(draw(st.integers(0, 2))):
        spec: dict[str, Any] = {}
        if draw(st.booleans()):
            spec["nodeSelector"] = {ARCH: "amd64"}
        if draw(st.booleans()):
            spec["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists"}]
        cpu, mem = draw(st.sampled_from((("100m", "128Mi"), ("500m", "1Gi"))))
        ds = pod(f"ds-{n}", cpu, mem, **spec)
        if draw(st.booleans()):  # a node exporter on host port 9100
            ds = replace(ds, host_ports=(*ds.host_ports, HostPort(port=9100)))
        out.append(ds)
    return tuple(out)


@st.composite
def scenarios(draw: st.DrawFn, *, per_group: int = 5, fleet: bool = False) -> Scenario:
    """``fleet``: many pods per group, no limits and no constraint that takes a node per pod,
    so most pods are placed and the packing has room to work."""
    types = draw(catalogs())
    alike = groups(most=per_group, per_node=not fleet)
    pods = [
        p
        for n, g in enumerate(draw(st.lists(alike, min_size=1, max_size=5)))
        for p in g.pods(f"g{n}")
    ]
    limits = (
        None if fleet else draw(st.sampled_from((None, None, None, {"cpu": "24"}, {"cpu": "64"})))
    )
    # Sometimes the pool asks for two instance types at least on every claim (minValues).
    min_types = draw(st.sampled_from(((), (), (), (MIN_TWO_TYPES,))))
    pools = [pool("default", limits=limits, requirements=min_types)]
    if draw(st.sampled_from((False, False, True))):
        pools.append(
            pool(
                "dedicated",
                weight=10,
                taints=[taint(TAINT_KEY, value="team")],
                limits=None if fleet else draw(st.sampled_from((None, {"cpu": "16"}))),
            )
        )
    return Scenario(tuple(pods), tuple(pools), types, draw(daemonsets()), draw(nodes()))


@st.composite
def nodes(draw: st.DrawFn) -> tuple[ExistingNode, ...]:
    """Up to two existing nodes not managed by a pool (used before any new claim): a zone, a
    size, sometimes the dedicated taint, sometimes a pod of group g0 already bound (it counts
    in g0's zone spread)."""
    out = []
    for n in range(draw(st.sampled_from((0, 0, 1, 2)))):
        cpu, mem = draw(st.sampled_from((("2", "4Gi"), ("4", "16Gi"))))
        tainted = draw(st.sampled_from((False, False, True)))
        taints = [{"key": TAINT_KEY, "value": "team", "effect": "NoSchedule"}] if tainted else []
        node = make_node(
            f"node-{n}", cpu, mem, labels={ZONE: draw(st.sampled_from(ZONES_2))}, taints=taints
        )
        bound = (
            [pod(f"bound-{n}", "500m", "1Gi", labels={"app": "g0"})] if draw(st.booleans()) else []
        )
        out.append(existing_node(node, bound))
    return tuple(out)


# ---------------------------------------------------------------------- plan facts


def placed_keys(plan: Plan) -> list[str]:
    keys = [p.key for nc in plan.new_node_claims for p in nc.pods]
    keys.extend(p.key for e in plan.existing for p in e.pods)
    return sorted(keys)


def fingerprint(plan: Plan) -> tuple[object, ...]:
    """Everything two equal plans share: cost, claims (type, offering, options, pods by key)."""
    return (
        plan.hourly_cost,
        tuple(
            (
                nc.node_pool,
                nc.instance_type.name,
                nc.offering,
                tuple(it.name for it in nc.instance_types),
                tuple(p.key for p in nc.pods),
                tuple(sorted(nc.labels.items())),
            )
            for nc in plan.new_node_claims
        ),
        tuple(sorted((e.pod.key, e.reason) for e in plan.errors)),
    )


def dearer(a: float, b: float) -> bool:
    """Whether ``a`` costs more than ``b`` beyond float noise."""
    return a > b * (1 + REL) + 1e-12


# ---------------------------------------------------------------------- properties


# (pods, greedy cost, packed cost, unplaced pods) per example run, for measuring the generator.
MAIN_LOG: list[tuple[int, float, float, int]] = []


@examples(300)
@given(scenarios())
def test_packed_plan_is_valid_places_the_same_pods_and_is_never_dearer(sc: Scenario) -> None:
    inp = sc.input()
    greedy = solve(sc.input(repack=False))
    packed = solve(inp)
    MAIN_LOG.append((len(sc.pods), greedy.hourly_cost, packed.hourly_cost, len(greedy.errors)))
    assert violations(inp, greedy) == []
    assert violations(inp, packed) == []
    assert placed_keys(packed) == placed_keys(greedy)
    assert not dearer(packed.hourly_cost, greedy.hourly_cost), (
        packed.hourly_cost,
        greedy.hourly_cost,
    )


@examples(60)
@given(scenarios(per_group=16, fleet=True))
def test_larger_fleets_pack_validly_and_never_dearer(sc: Scenario) -> None:
    """Up to 80 pods: the packing plans patterns with multiplicities (column generation and
    its rounding), which the small examples rarely reach."""
    inp = sc.input()
    greedy = solve(sc.input(repack=False))
    packed = solve(inp)
    LARGE_LOG.append((len(sc.pods), greedy.hourly_cost, packed.hourly_cost, len(greedy.errors)))
    assert violations(inp, packed) == []
    assert placed_keys(packed) == placed_keys(greedy)
    assert not dearer(packed.hourly_cost, greedy.hourly_cost)


LARGE_LOG: list[tuple[int, float, float, int]] = []


@examples(150)
@given(scenarios())
def test_packing_without_split_uses_no_more_claims(sc: Scenario) -> None:
    inp = sc.input(repack_split=False)
    greedy = solve(sc.input(repack=False))
    packed = solve(inp)
    assert violations(inp, packed) == []
    assert placed_keys(packed) == placed_keys(greedy)
    assert len(packed.new_node_claims) <= len(greedy.new_node_claims)
    assert not dearer(packed.hourly_cost, greedy.hourly_cost)


@examples(100)
@given(scenarios())
def test_solving_twice_gives_the_same_plan(sc: Scenario) -> None:
    assert fingerprint(solve(sc.input())) == fingerprint(solve(sc.input()))


# ---------------------------------------------------------------------- optimality on tiny cases


def partitions(items: Sequence[int]) -> Iterator[list[list[int]]]:
    """Every partition of ``items`` into non-empty blocks (Bell(6) = 203 for six)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in partitions(rest):
        yield [[first], *part]
        for n in range(len(part)):
            yield [*part[:n], [first, *part[n]], *part[n + 1 :]]


def optimum(sc: Scenario) -> tuple[float, list[str]]:
    """The exact cheapest cost of placing the pods of a one-pool, topology-free scenario on new
    nodes, and the pods no type holds alone (left out of it): each block of a partition on the
    cheapest type that holds it (DaemonSet overhead included, via PoolIndex), minimised over
    all partitions."""
    (only,) = sc.pools
    idx = PoolIndex(only, sc.types, sc.daemonsets)
    unfit = [p.key for p in sc.pods if not idx.fit_mask(p.requests)]
    pods = [p for p in sc.pods if p.key not in unfit]
    block_cost: dict[tuple[int, ...], float] = {}

    def cost(block: list[int]) -> float:
        key = tuple(sorted(block))
        held = block_cost.get(key)
        if held is None:
            total: dict[str, int] = {}
            for i in key:
                for name, amount in pods[i].requests.items():
                    total[name] = total.get(name, 0) + amount
            price = idx.cheapest_price(idx.fit_mask(total), idx.requirements)
            held = float("inf") if price is None else price
            block_cost[key] = held
        return held

    best = min(sum(cost(b) for b in part) for part in partitions(list(range(len(pods)))))
    return best, unfit


@st.composite
def tiny_scenarios(draw: st.DrawFn) -> Scenario:
    types = draw(catalogs(most=4))
    gs = draw(st.lists(groups(constrained=False), min_size=1, max_size=3))
    pods = [p for n, g in enumerate(gs) for p in g.pods(f"g{n}")][:6]
    ds = draw(st.sampled_from(((), (pod("ds-0", "100m", "128Mi"),))))
    return Scenario(tuple(pods), (pool("default"),), types, ds)


# The packed cost over the exact optimum, at most. Measured over these 200 derandomized examples
# (TINY_LOG: 194 place some pod): the packing reached the optimum on all 194 (worst ratio 1.0),
# greedy on 154 (worst 8.85x, mean 1.28x). So no slack beyond float noise. (Random search finds
# rare misses: with @seed(20261202), 6 of the 4,964 of 5,000 examples that place a pod, worst
# 1.58x, once small nodes' fills are searched exactly; 12 before. The hand-worked table's last
# two rows were such misses.)
TINY_FACTOR: Final = 1.0
TINY_LOG: list[tuple[float, float, float]] = []  # (greedy, packed, optimum) per example run


@examples(200)
@given(tiny_scenarios())
def test_tiny_packing_is_within_reach_of_the_optimum(sc: Scenario) -> None:
    greedy = solve(sc.input(repack=False))
    packed = solve(sc.input())
    best, unfit = optimum(sc)
    assert sorted(e.pod.key for e in packed.errors) == sorted(unfit)
    if best > 0:  # some pod placed
        TINY_LOG.append((greedy.hourly_cost, packed.hourly_cost, best))
    assert not dearer(packed.hourly_cost, greedy.hourly_cost)
    assert not dearer(best, packed.hourly_cost), "the brute force missed a cheaper plan"
    assert not dearer(packed.hourly_cost, best * TINY_FACTOR), (packed.hourly_cost, best)


def _one(name: str, cpu: float, mem: float, price: float) -> InstanceType:
    return itype(name, cpu, mem, price=price, zones=("zone-a",), capacity_types=("on-demand",))


# Worked by hand: the greedy plan, the packed plan with and without splitting, and the optimum.
@pytest.mark.parametrize(
    ("pods", "types", "greedy", "unsplit", "expected"),
    [
        pytest.param(
            # Greedy already fills the 4-cpu type: nothing to gain.
            [("1", "1Gi")] * 4,
            [_one("two", 2, 8, 1.0), _one("four", 4, 16, 1.5)],
            1.5,
            1.5,
            1.5,
            id="four-small-pods-one-big-node",
        ),
        pytest.param(
            # Greedy puts both on the dear 4-cpu type ($3); two 2-cpu nodes cost $2.
            [("2", "1Gi")] * 2,
            [_one("two", 2, 8, 1.0), _one("four", 4, 16, 3.0)],
            3.0,
            3.0,
            2.0,
            id="split-a-dear-big-node-in-two-small",
        ),
        pytest.param(
            # Greedy grows one node to the big type ($5); the cpu pods fit the compute type and
            # the memory pods the memory type alone, but neither pair shares one: 4 x $1.
            [("3", "1Gi")] * 2 + [("500m", "7Gi")] * 2,
            [_one("cpu", 4, 2, 1.0), _one("mem", 1, 8, 1.0), _one("big", 8, 18, 5.0)],
            5.0,
            5.0,
            4.0,
            id="cpu-pods-on-compute-memory-pods-on-memory",
        ),
        pytest.param(
            # Two pods fill the 4-cpu type, the third goes on a 2-cpu one: already optimal.
            [("1500m", "1Gi")] * 3,
            [_one("two", 2, 8, 1.0), _one("four", 4, 16, 1.5)],
            2.5,
            2.5,
            2.5,
            id="odd-pod-on-the-small-type",
        ),
        pytest.param(
            # Greedy stacks 5+5+3+3 cpu on the 16-cpu type ($3); 5+3 twice on 8-cpu is $2.
            [("5", "1Gi")] * 2 + [("3", "1Gi")] * 2,
            [_one("eight", 8, 16, 1.0), _one("sixteen", 16, 32, 3.0)],
            3.0,
            3.0,
            2.0,
            id="pair-big-and-small-pods-on-two-nodes",
        ),
        pytest.param(
            # One type: greedy (and first-fit decreasing) put 3+3, 2+2+2, 2 on three nodes; 3+2+2
            # twice fits two. The greedy knapsack orders fill the first class as far as it goes
            # and miss {3, 2, 2}; the exact fill of small nodes finds it (two claims, not three).
            [("3", "1Gi")] * 2 + [("2", "1Gi")] * 4,
            [_one("seven", 7.5, 32, 1.0)],
            3.0,
            2.0,
            2.0,
            id="3-2-2-twice-on-one-type",
        ),
        pytest.param(
            # Greedy: the two 2-cpu pods on an 8-cpu node (the 3.5-cpu type holds one), the
            # 13Gi pod on another ($4). One 2-cpu pod beside the 13Gi pod and the other on the
            # small type is $3, as many claims as greedy's: found by the exact fill.
            [("1", "13Gi")] + [("2", "2Gi")] * 2,
            [_one("c4", 3.5, 8, 1.0), _one("c8", 8, 16, 2.0)],
            4.0,
            3.0,
            3.0,
            id="moving-one-pod-beside-the-big-one",
        ),
    ],
)
def test_hand_worked_tiny_optima_are_reached(
    pods: list[tuple[str, str]],
    types: list[InstanceType],
    greedy: float,
    unsplit: float,
    expected: float,
) -> None:
    sc = Scenario(
        tuple(pod(f"p{n}", cpu, mem) for n, (cpu, mem) in enumerate(pods)),
        (pool("default"),),
        tuple(types),
    )
    assert optimum(sc) == (expected, [])
    assert solve(sc.input(repack=False)).hourly_cost == greedy
    assert solve(sc.input(repack_split=False)).hourly_cost == unsplit
    packed = solve(sc.input())
    assert violations(sc.input(), packed) == []
    assert packed.hourly_cost == pytest.approx(expected, rel=REL)
