"""nodeSelector, required node affinity (OR-ed terms) and preferred node affinity with relaxation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.scheduling._helpers import (
    ARCH,
    ZONE,
    claim_of,
    error_of,
    itype,
    pod,
    pool,
    req_values,
    run,
)

# zone-b and zone-c cost more, so with no constraint the solver picks zone-a.
TYPES = [
    itype("small", 2, 4, zone_prices={"zone-a": 0.10, "zone-b": 0.12, "zone-c": 0.14}),
    itype("large", 8, 16, zone_prices={"zone-a": 0.40, "zone-b": 0.48, "zone-c": 0.56}),
    itype("arm", 2, 4, arch="arm64", zone_prices={"zone-a": 0.09, "zone-b": 0.11, "zone-c": 0.13}),
]


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def preferred(*weighted: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": {"matchExpressions": t}} for w, t in weighted
            ]
        }
    }


def both(req: dict[str, Any], pref: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {**req["nodeAffinity"], **pref["nodeAffinity"]}}


def zone_of(plan: Any, name: str) -> str:
    nc = claim_of(plan, name)
    assert nc.offering.zone == nc.labels[ZONE]
    return nc.labels[ZONE]


def test_unconstrained_pod_takes_the_cheapest_offering():
    plan = run([pod("p")], types=TYPES)
    nc = claim_of(plan, "p")
    assert (nc.instance_type.name, nc.labels[ZONE], nc.labels["karpenter.sh/capacity-type"]) == (
        "arm",
        "zone-a",
        "spot",
    )


@pytest.mark.parametrize(
    ("selector", "zone", "itype_name"),
    [
        ({ZONE: "zone-b"}, "zone-b", "arm"),
        ({ZONE: "zone-c", ARCH: "amd64"}, "zone-c", "small"),
        ({"failure-domain.beta.kubernetes.io/zone": "zone-b"}, "zone-b", "arm"),  # normalised
        ({"beta.kubernetes.io/arch": "amd64"}, "zone-a", "small"),
    ],
)
def test_node_selector(selector, zone, itype_name):
    plan = run([pod("p", nodeSelector=selector)], types=TYPES)
    nc = claim_of(plan, "p")
    assert (zone_of(plan, "p"), nc.instance_type.name) == (zone, itype_name)
    assert req_values(nc, ZONE) == (zone,) or ZONE not in selector


def test_node_selector_on_custom_label_needs_a_pool_that_defines_it():
    pools = [
        pool("plain", weight=100),
        pool("team-a", labels={"team": "a"}),
        pool("team-b", requirements=[_sel("team", "In", "b")]),
    ]
    plan = run(
        # c is the largest so it goes first, to the heaviest pool; a and b cannot join it
        [
            pod("a", nodeSelector={"team": "a"}),
            pod("b", nodeSelector={"team": "b"}),
            pod("c", "1500m"),
        ],
        pools=pools,
        types=TYPES,
    )
    assert claim_of(plan, "a").node_pool == "team-a"
    assert claim_of(plan, "a").labels["team"] == "a"
    assert claim_of(plan, "b").node_pool == "team-b"
    assert claim_of(plan, "b").labels["team"] == "b"
    assert claim_of(plan, "c").node_pool == "plain"


def test_node_selector_nobody_can_satisfy_names_the_label():
    plan = run([pod("p", nodeSelector={"team": "x"})], types=TYPES)
    reason = error_of(plan, "p")
    assert 'label "team" does not have known values' in reason


def test_node_selector_with_unknown_zone_is_unschedulable():
    plan = run([pod("p", nodeSelector={ZONE: "zone-x"})], types=TYPES)
    reason = error_of(plan, "p")
    assert "zone-x" in reason


@pytest.mark.parametrize(
    ("terms", "zone"),
    [
        # first term satisfiable: it wins even though the second is listed too
        ([[expr(ZONE, "In", "zone-b")], [expr(ZONE, "In", "zone-c")]], "zone-b"),
        # first term unsatisfiable: falls back to the second OR-ed term
        ([[expr(ZONE, "In", "zone-x")], [expr(ZONE, "In", "zone-c")]], "zone-c"),
        ([[expr("team", "In", "a")], [expr(ZONE, "NotIn", "zone-a", "zone-b")]], "zone-c"),
        # expressions inside one term are ANDed
        ([[expr(ZONE, "In", "zone-b", "zone-c"), expr(ZONE, "NotIn", "zone-b")]], "zone-c"),
    ],
)
def test_required_node_affinity_or_terms(terms, zone):
    plan = run([pod("p", affinity=required(*terms))], types=TYPES)
    assert not plan.errors
    assert zone_of(plan, "p") == zone


def test_required_node_affinity_all_terms_unsatisfiable():
    terms = [[expr(ZONE, "In", "zone-x")], [expr(ZONE, "In", "zone-y")]]
    plan = run([pod("p", affinity=required(*terms))], types=TYPES)
    reason = error_of(plan, "p")
    assert "zone-y" in reason
    assert "dropped a required node affinity term" in reason


@pytest.mark.parametrize(
    ("operator", "values", "itype_name"),
    [
        ("Gt", ("4",), "large"),
        ("Lt", ("4",), "small"),
        ("Gte", ("8",), "large"),
        ("Lte", ("2",), "small"),
    ],
)
def test_numeric_operators_on_instance_labels(operator, values, itype_name):
    types = [
        itype("small", 2, 4, labels={"karpenter.k8s.aws/instance-cpu": "2"}),
        itype("large", 8, 16, labels={"karpenter.k8s.aws/instance-cpu": "8"}),
    ]
    aff = required([expr("karpenter.k8s.aws/instance-cpu", operator, *values)])
    plan = run([pod("p", affinity=aff)], types=types)
    assert claim_of(plan, "p").instance_type.name == itype_name


def test_preferred_node_affinity_is_respected_when_possible():
    aff = preferred((1, [expr(ZONE, "In", "zone-b")]), (50, [expr(ZONE, "In", "zone-c")]))
    plan = run([pod("p", affinity=aff)], types=TYPES)
    # the heaviest preference wins, even though zone-a is cheaper
    assert zone_of(plan, "p") == "zone-c"


def test_preferred_node_affinity_is_relaxed_when_impossible():
    aff = preferred((10, [expr(ZONE, "In", "zone-x")]))
    plan = run([pod("p", affinity=aff)], types=TYPES)
    assert not plan.errors
    assert zone_of(plan, "p") == "zone-a"


def test_heaviest_preference_relaxed_first_then_the_next():
    aff = preferred((50, [expr(ZONE, "In", "zone-x")]), (10, [expr(ZONE, "In", "zone-c")]))
    plan = run([pod("p", affinity=aff)], types=TYPES)
    assert zone_of(plan, "p") == "zone-c"


def test_preferred_never_overrides_required():
    aff = both(
        required([expr(ZONE, "In", "zone-a", "zone-b")]),
        preferred((100, [expr(ZONE, "In", "zone-c")])),
    )
    plan = run([pod("p", affinity=aff)], types=TYPES)
    assert not plan.errors
    assert zone_of(plan, "p") == "zone-a"


def test_preferred_conflicting_with_node_selector_is_relaxed():
    aff = preferred((100, [expr(ZONE, "In", "zone-c")]))
    plan = run([pod("p", nodeSelector={ZONE: "zone-b"}, affinity=aff)], types=TYPES)
    assert zone_of(plan, "p") == "zone-b"


@pytest.mark.parametrize(("policy", "zone"), [("Respect", "zone-b"), ("Ignore", "zone-a")])
def test_preference_policy(policy, zone):
    aff = preferred((10, [expr(ZONE, "In", "zone-b")]))
    plan = run([pod("p", affinity=aff)], types=TYPES, policy=policy)
    assert zone_of(plan, "p") == zone


def test_preference_policy_ignore_keeps_required_terms():
    aff = both(
        required([expr(ZONE, "In", "zone-c")]), preferred((10, [expr(ZONE, "In", "zone-b")]))
    )
    plan = run([pod("p", affinity=aff)], types=TYPES, policy="Ignore")
    assert zone_of(plan, "p") == "zone-c"


def test_required_affinity_match_fields_is_rejected_up_front():
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                ]
            }
        }
    }
    plan = run([pod("p", affinity=aff)], types=TYPES)
    assert "matchFields" in error_of(plan, "p")


def test_nodepool_does_not_exist_requirement_is_rejected():
    aff = required([expr("karpenter.sh/nodepool", "DoesNotExist")])
    plan = run([pod("p", affinity=aff)], types=TYPES)
    assert "karpenter.sh/nodepool DoesNotExist" in error_of(plan, "p")


def _sel(key: str, op: str, *values: str, mv: int | None = None) -> Any:
    from karpenter_py.model.core import SelectorRequirement

    return SelectorRequirement(key, op, values, mv)
