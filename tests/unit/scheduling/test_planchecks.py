"""The plan checker (``planchecks.violations``) finds each rule a plan breaks.

Each case solves a small input, then breaks one rule in the plan by hand; the checker must name
exactly that rule (a checker that never fires would let the property tests pass vacuously).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from karpenter_py.model.core import Pod, SelectorRequirement
from karpenter_py.scheduling.inputs import PoolTemplate, SolveInput
from karpenter_py.scheduling.plan import Plan, PodError
from karpenter_py.scheduling.scheduler import solve
from tests.unit.scheduling._helpers import (
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    existing,
    itype,
    make_node,
    pod,
    pool,
    spread,
    taint,
)
from tests.unit.scheduling.planchecks import violations

ZONES = ("zone-a", "zone-b")
SMALL = itype("small", 2, 4, price=0.1, zones=ZONES, capacity_types=("on-demand",))
LARGE = itype("large", 8, 16, price=0.4, zones=ZONES, capacity_types=("on-demand",))


def solved(pods: list[Pod], pools: list[PoolTemplate] | None = None) -> tuple[SolveInput, Plan]:
    pools = pools or [pool()]
    inp = SolveInput(pods=pods, pools=pools, instance_types={p.name: [SMALL, LARGE] for p in pools})
    return inp, solve(inp)


def on_one_claim(plan: Plan) -> Plan:
    """Every pod of the plan moved onto its first claim (requests summed to match)."""
    pods = tuple(p for nc in plan.new_node_claims for p in nc.pods)
    requests: dict[str, int] = {}
    for p in pods:
        for name, amount in p.requests.items():
            requests[name] = requests.get(name, 0) + amount
    first = replace(plan.new_node_claims[0], pods=pods, requests=requests)
    return replace(plan, new_node_claims=(first,))


def _with_error(plan: Plan) -> Plan:
    return replace(plan, errors=(PodError(plan.new_node_claims[0].pods[0], "no"),))


def _cheaper_option_too_small(plan: Plan) -> Plan:
    nc = plan.new_node_claims[0]
    return replace(plan, new_node_claims=(replace(nc, instance_types=(SMALL, LARGE)),))


def _zone_opened(plan: Plan) -> Plan:
    nc = plan.new_node_claims[0]
    reqs = tuple(
        SelectorRequirement(ZONE, "In", ZONES) if r.key == ZONE else r for r in nc.requirements
    )
    return replace(plan, new_node_claims=(replace(nc, requirements=reqs),))


def _tainted(plan: Plan) -> Plan:
    nc = plan.new_node_claims[0]
    return replace(plan, new_node_claims=(replace(nc, taints=(taint("dedicated"),)),))


ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}
        ]
    }
}


def _ported(name: str) -> Pod:
    """A pod asking for host port 8080 (TCP, every address)."""
    port = {"containerPort": 8080, "hostPort": 8080}
    container = {"name": "app", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    return pod(name, containers=[{**container, "ports": [port]}])


CASES: list[tuple[str, list[Pod], list[PoolTemplate] | None, Callable[[Plan], Plan], list[str]]] = [
    ("valid", [pod("a"), pod("b")], None, lambda p: p, []),
    (
        "placed-and-failed",
        [pod("a")],
        None,
        _with_error,
        ["pod default/a: placed 1 times, 1 errors"],
    ),
    (
        "cheapest-option-cannot-hold-the-pods",
        [pod("a", "3")],
        None,
        _cheaper_option_too_small,
        [
            "hostname-placeholder-00000: option small ({'cpu': 2000, 'memory': 4294967296, "
            "'pods': 110} after daemonsets) cannot hold {'cpu': 3000, 'memory': 134217728, "
            "'pods': 1}",
            "hostname-placeholder-00000: option small is incompatible with the claim: "
            "node.kubernetes.io/instance-type In [large] excludes "
            "node.kubernetes.io/instance-type In [small]",
            "hostname-placeholder-00000: launch price 0.4 is not the cheapest option's 0.1",
        ],
    ),
    (
        "node-selector-no-longer-pinned",
        [pod("a", nodeSelector={ZONE: "zone-b"})],
        None,
        _zone_opened,
        [
            "hostname-placeholder-00000: pod default/a's node requirements fail on option small",
            "hostname-placeholder-00000: pod default/a's node requirements fail on option large",
        ],
    ),
    (
        "untolerated-taint",
        [pod("a")],
        None,
        _tainted,
        [
            "hostname-placeholder-00000: pod default/a does not tolerate "
            "Taint(key='dedicated', effect='NoSchedule', value='')"
        ],
    ),
    (
        "host-ports-clash",
        [_ported("a"), _ported("b")],
        None,
        on_one_claim,
        ["hostname-placeholder-00000: pods default/a and default/b both use host port 8080"],
    ),
    (
        "anti-affine-pods-share-a-node",
        [
            pod("a", labels={"app": "web"}, affinity=ANTI),
            pod("b", labels={"app": "web"}, affinity=ANTI),
        ],
        None,
        on_one_claim,
        [
            "hostname-placeholder-00000: default/a shares hostname-placeholder-00000 with "
            "default/b, which it repels",
            "hostname-placeholder-00000: default/b shares hostname-placeholder-00000 with "
            "default/a, which it repels",
        ],
    ),
    (
        "zone-spread-skewed",
        [
            pod(
                "a", labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, {"app": "web"})]
            ),
            pod(
                "b", labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, {"app": "web"})]
            ),
        ],
        None,
        on_one_claim,
        [
            "pod default/a: zone counts {'zone-a': 2, 'zone-b': 0} skew more than 1",
            "pod default/b: zone counts {'zone-a': 2, 'zone-b': 0} skew more than 1",
        ],
    ),
]


@pytest.mark.parametrize(
    ("pods", "pools", "tamper", "expected"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_checker_names_the_broken_rule(
    pods: list[Pod],
    pools: list[PoolTemplate] | None,
    tamper: Callable[[Plan], Plan],
    expected: list[str],
) -> None:
    inp, plan = solved(pods, pools)
    assert violations(inp, plan) == []
    assert violations(inp, tamper(plan)) == expected


def test_checker_counts_limits_by_the_largest_option() -> None:
    """Two claims (their host ports clash) whose options are {small, large} count 8 cpu each
    against the pool's limits, though each launches as small: 16 cpu is over a 12-cpu limit."""
    inp, plan = solved([_ported("a"), _ported("b")])
    assert [[it.name for it in nc.instance_types] for nc in plan.new_node_claims] == [
        ["small", "large"],
        ["small", "large"],
    ]
    limited = replace(inp, pools=[pool(limits={"cpu": "12"})])
    assert violations(limited, plan) == [
        "nodepool default: {'cpu': 16000} exceeds its limits {'cpu': 12000}"
    ]


def test_checker_finds_an_existing_node_overfilled() -> None:
    """Two 1-cpu pods fit a 1.5-cpu existing node one at a time, not together."""
    node = existing(make_node("node-0", "1500m", "8Gi", labels={ZONE: "zone-a"}))
    pods = [pod("a", "1"), pod("b", "1")]
    inp = SolveInput(
        pods=pods, pools=[pool()], instance_types={"default": [SMALL, LARGE]}, existing=[node]
    )
    plan = solve(inp)
    assert [[p.name for p in e.pods] for e in plan.existing] == [["a"]]
    assert violations(inp, plan) == []
    crowded = replace(
        plan,
        new_node_claims=(),
        existing=(replace(plan.existing[0], pods=tuple(pods)),),
    )
    assert violations(inp, crowded) == ["node node-0: {'cpu': 2000} is over its allocatable"]


def test_checker_finds_min_values_unmet() -> None:
    """The pool wants two instance types on every claim; a claim cut to one breaks it (and
    leaves out an option that could launch it)."""
    two = pool(requirements=[SelectorRequirement(INSTANCE_TYPE, "Exists", (), 2)])
    inp, plan = solved([pod("a")], [two])
    assert violations(inp, plan) == []
    nc = plan.new_node_claims[0]
    cut = replace(plan, new_node_claims=(replace(nc, instance_types=(SMALL,)),))
    assert violations(inp, cut) == [
        "hostname-placeholder-00000: node.kubernetes.io/instance-type minValues 2, "
        "options give ['small']",
        "hostname-placeholder-00000: types ['large'] could launch it but are not options",
    ]


def test_checker_finds_zone_affinity_without_its_pod() -> None:
    """web needs a db pod in its zone: with db on the zone-a node, web's claim is pinned to
    zone-a; take db out of the plan (as if it failed) and web is alone there."""
    node = existing(make_node("node-0", "1", "8Gi", labels={ZONE: "zone-a"}))
    db = pod("db", "1", labels={"app": "db"})
    web = pod(
        "web",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
                ]
            }
        },
    )
    inp = SolveInput(
        pods=[db, web], pools=[pool()], instance_types={"default": [SMALL, LARGE]}, existing=[node]
    )
    plan = solve(inp)
    assert [[p.name for p in e.pods] for e in plan.existing] == [["db"]]
    assert violations(inp, plan) == []
    alone = replace(plan, existing=(), errors=(PodError(db, "gone"),))
    assert violations(inp, alone) == [
        "pod default/web may be in zones ['zone-a'] with no pod its affinity selects"
    ]
