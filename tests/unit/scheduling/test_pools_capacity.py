"""Where pods go: NodePool weights and limits, existing and in-flight capacity, prices, minValues."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.core import SelectorRequirement
from karpenter_py.scheduling.inputs import ExistingNode
from tests.unit.scheduling._helpers import (
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    by_pod,
    claim_of,
    error_of,
    existing,
    itype,
    make_node,
    pod,
    pool,
    req_values,
    run,
)

FAMILY = "example.com/family"


def sel(key: str, op: str, *values: str, mv: int | None = None) -> SelectorRequirement:
    return SelectorRequirement(key, op, values, mv)


TYPES = [itype("small", 2, 4), itype("medium", 4, 8), itype("large", 8, 16)]


def anti_host(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}
            ]
        }
    }


# ----------------------------------------------------------------------------- weights


def test_highest_weight_pool_first():
    pools = [pool("low", weight=10), pool("high", weight=50), pool("none")]
    plan = run([pod("p")], pools=pools, types=TYPES)
    assert claim_of(plan, "p").node_pool == "high"


def test_falls_through_to_lower_weight_when_incompatible():
    pools = [
        pool("arm", weight=100, requirements=[sel("kubernetes.io/arch", "In", "arm64")]),
        pool("amd", weight=1),
    ]
    plan = run([pod("p")], pools=pools, types=TYPES)
    assert claim_of(plan, "p").node_pool == "amd"


def test_falls_through_when_the_heavier_pool_has_no_type_that_fits():
    pools = [pool("tiny", weight=100), pool("big", weight=1)]
    types = {"tiny": [itype("t", 1, 2)], "big": TYPES}
    plan = run([pod("p", "3")], pools=pools, types=types)
    assert claim_of(plan, "p").node_pool == "big"


def test_equal_weights_are_ordered_by_name_descending():
    plan = run([pod("p")], pools=[pool("alpha"), pool("beta"), pool("aardvark")], types=TYPES)
    assert claim_of(plan, "p").node_pool == "beta"


def test_weight_beats_price():
    pools = [pool("pricey", weight=10), pool("cheap")]
    types = {"pricey": [itype("x", 2, 4, price=5.0)], "cheap": [itype("y", 2, 4, price=0.01)]}
    plan = run([pod("p")], pools=pools, types=types)
    assert claim_of(plan, "p").instance_type.name == "x"


# ----------------------------------------------------------------------------- limits


def test_cpu_limit_filters_types_and_stops_launches():
    limited = pool(limits={"cpu": "4"})
    plan = run([pod(f"p{i}", "1500m", None) for i in range(5)], pools=[limited], types=TYPES)
    assert len(plan.new_node_claims) == 1
    nc = plan.new_node_claims[0]
    assert nc.instance_type.name == "medium"
    assert "large" not in [it.name for it in nc.instance_types]
    assert len(nc.pods) == 2
    assert len(plan.errors) == 3
    for e in plan.errors:
        assert "limits" in e.reason
        assert 'nodepool "default"' in e.reason


def test_limits_are_charged_by_the_largest_option_across_claims():
    limited = pool(limits={"cpu": "6"})
    plan = run([pod(f"p{i}", "1500m", None) for i in range(6)], pools=[limited], types=TYPES)
    # the first claim may still become a medium, so 4 of the 6 cpus are charged for it; the second
    # claim can then only be a small one, and after it nothing fits in the limit
    first, second = plan.new_node_claims
    assert [it.name for it in first.instance_types] == ["medium"]
    assert [it.name for it in second.instance_types] == ["small"]
    assert (len(first.pods), len(second.pods)) == (2, 1)
    assert len(plan.errors) == 3
    assert all("limits" in e.reason for e in plan.errors)


def test_limits_account_for_existing_usage():
    limited = pool(limits={"cpu": "10"}, usage={"cpu": "7"})
    plan = run([pod("p", "100m", None)], pools=[limited], types=TYPES)
    nc = claim_of(plan, "p")
    assert [it.name for it in nc.instance_types] == ["small"]


def test_limit_exhausted_by_usage_gives_a_limits_reason():
    limited = pool(limits={"cpu": "10"}, usage={"cpu": "10"})
    plan = run([pod("p")], pools=[limited], types=TYPES)
    assert "limits" in error_of(plan, "p")


def test_node_count_limit():
    limited = pool(limits={"nodes": "2"})
    plan = run(
        [pod(f"w{i}", labels={"app": "w"}, affinity=anti_host({"app": "w"})) for i in range(3)],
        pools=[limited],
        types=TYPES,
    )
    assert len(plan.new_node_claims) == 2
    assert "limits" in plan.errors[0].reason


def test_limited_pool_overflows_into_the_next_pool():
    pools = [pool("first", weight=10, limits={"cpu": "4"}), pool("second")]
    plan = run([pod(f"p{i}", "3", None) for i in range(3)], pools=pools, types=TYPES)
    assert not plan.errors
    assert sorted((nc.node_pool, len(nc.pods)) for nc in plan.new_node_claims) == [
        ("first", 1),
        ("second", 2),
    ]


# ----------------------------------------------------------------------------- existing capacity


def test_existing_nodes_are_used_before_new_ones():
    node = existing(make_node("n1", cpu="2", mem="4Gi"))
    plan = run([pod("a", "1"), pod("b", "900m")], existing=[node], types=TYPES)
    assert by_pod(plan) == {"a": "node/n1", "b": "node/n1"}
    assert not plan.new_node_claims
    assert plan.hourly_cost == 0


def test_existing_node_remaining_capacity_counts_bound_pods():
    node = existing(make_node("n1", cpu="2"), [pod("old", "1500m")])
    plan = run([pod("a", "1")], existing=[node], types=TYPES)
    assert by_pod(plan)["a"].startswith("claim-")


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        # initialized before uninitialized, then by name
        ([("b", True, False), ("a", False, False)], "b"),
        ([("b", True, False), ("a", True, False)], "a"),
        # an in-flight NodeClaim (no Node yet) is used before launching anything new
        ([("full", True, False), ("in-flight", False, True)], "in-flight"),
    ],
)
def test_existing_node_order(nodes, expected):
    ex = []
    for name, initialized, in_flight in nodes:
        cpu = "100m" if name == "full" else "4"
        ex.append(
            existing(
                make_node(name, cpu=cpu),
                pool_name="default",
                initialized=initialized,
                in_flight=in_flight,
            )
        )
    plan = run([pod("p", "1")], existing=ex, types=TYPES)
    assert by_pod(plan)["p"] == f"node/{expected}"


def test_nodes_marked_for_deletion_are_not_used():
    gone = existing(make_node("gone"))
    gone = ExistingNode(node=gone.node, marked_for_deletion=True)
    plan = run([pod("p")], existing=[gone], types=TYPES)
    assert by_pod(plan)["p"].startswith("claim-")


@pytest.mark.parametrize(
    ("selector", "node_labels", "fits"),
    [
        ({ZONE: "zone-a"}, {ZONE: "zone-a"}, True),
        ({ZONE: "zone-b"}, {ZONE: "zone-a"}, False),
        ({"team": "a"}, {}, False),  # a label the node lacks cannot be assumed
        ({"kubernetes.io/arch": "amd64"}, {}, False),  # not even a well-known one
        ({"team": "a"}, {"team": "a"}, True),
    ],
)
def test_existing_node_labels_must_satisfy_the_pod(selector, node_labels, fits):
    node = existing(make_node("n1", labels=node_labels))
    pools = [pool(labels={"team": "a"})]
    plan = run([pod("p", nodeSelector=selector)], existing=[node], pools=pools, types=TYPES)
    assert (by_pod(plan)["p"] == "node/n1") is fits


# ----------------------------------------------------------------------------- prices


def test_cheapest_offering_spot_over_on_demand():
    plan = run([pod("p")], types=TYPES)
    nc = claim_of(plan, "p")
    assert (nc.instance_type.name, nc.offering.capacity_type) == ("small", "spot")
    assert nc.labels[CAPACITY_TYPE] == "spot"
    assert nc.price == pytest.approx(TYPES[0].offerings[1].price)


def test_on_demand_only_pool():
    od = pool(requirements=[sel(CAPACITY_TYPE, "In", "on-demand")])
    plan = run([pod("p")], pools=[od], types=TYPES)
    nc = claim_of(plan, "p")
    assert nc.offering.capacity_type == "on-demand"
    assert req_values(nc, CAPACITY_TYPE) == ("on-demand",)


def test_pod_requiring_on_demand():
    plan = run([pod("p", nodeSelector={CAPACITY_TYPE: "on-demand"})], types=TYPES)
    assert claim_of(plan, "p").offering.capacity_type == "on-demand"


def test_zone_restricted_pricing():
    types = [
        itype("x", 2, 4, zone_prices={"zone-a": 0.05, "zone-b": 0.50, "zone-c": 0.50}),
        itype("y", 2, 4, zone_prices={"zone-a": 0.10, "zone-b": 0.10, "zone-c": 0.10}),
    ]
    anywhere = run([pod("p")], types=types)
    assert (claim_of(anywhere, "p").instance_type.name, claim_of(anywhere, "p").labels[ZONE]) == (
        "x",
        "zone-a",
    )
    in_b = run([pod("p", nodeSelector={ZONE: "zone-b"})], types=types)
    nc = claim_of(in_b, "p")
    assert (nc.instance_type.name, nc.labels[ZONE]) == ("y", "zone-b")
    assert [it.name for it in nc.instance_types] == ["y", "x"]


def test_unavailable_offerings_are_skipped():
    types = [
        itype(
            "cheap",
            2,
            4,
            price=0.1,
            unavailable=[
                (z, ct)
                for z in ("zone-a", "zone-b", "zone-c")
                for ct in ("spot", "on-demand")
                if (z, ct) != ("zone-c", "on-demand")
            ],
        ),
        itype("other", 2, 4, price=0.2),
    ]
    plan = run([pod("p")], types=types)
    nc = claim_of(plan, "p")
    assert (nc.instance_type.name, nc.offering.zone, nc.offering.capacity_type) in {
        ("other", "zone-a", "spot"),
    }
    on_demand_c = run(
        [pod("p", nodeSelector={ZONE: "zone-c", CAPACITY_TYPE: "on-demand"})], types=types
    )
    assert claim_of(on_demand_c, "p").instance_type.name == "cheap"


def test_options_are_ordered_cheapest_first():
    types = [itype("c", 8, 16), itype("a", 2, 4), itype("b", 4, 8)]
    plan = run([pod("p")], types=types)
    nc = claim_of(plan, "p")
    assert [it.name for it in nc.instance_types] == ["a", "b", "c"]
    assert nc.instance_type.name == "a"


# ----------------------------------------------------------------------------- truncation and minValues


def family_types(n_per_family: dict[str, int]) -> list[Any]:
    out = []
    price = 0.10
    for fam, n in n_per_family.items():
        for i in range(n):
            out.append(itype(f"{fam}-{i}", 2, 4, price=round(price, 4), labels={FAMILY: fam}))
            price += 0.01
    return out


def test_truncation_keeps_the_cheapest_options():
    types = [itype(f"t{i:02d}", 2, 4, price=0.1 + i / 100) for i in range(10)]
    plan = run([pod("p")], types=types, max_instance_types=3)
    nc = claim_of(plan, "p")
    assert [it.name for it in nc.instance_types] == ["t00", "t01", "t02"]
    assert req_values(nc, INSTANCE_TYPE) == ("t00", "t01", "t02")


def test_default_max_instance_types_is_600():
    types = [itype(f"t{i:03d}", 2, 4, price=0.1 + i / 10000) for i in range(650)]
    plan = run([pod("p")], types=types)
    assert len(claim_of(plan, "p").instance_types) == 600


def test_truncation_respects_min_values():
    types = family_types({"a": 6, "b": 2, "c": 2})  # the 3 cheapest are all family a
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=3)])
    plan = run([pod("p")], pools=[fam], types=types, max_instance_types=3)
    assert not plan.errors
    nc = claim_of(plan, "p")
    assert len(nc.instance_types) == 3
    assert {it.requirements[FAMILY] for it in nc.instance_types} == {
        frozenset({"a"}),
        frozenset({"b"}),
        frozenset({"c"}),
    }
    assert nc.instance_type.name == "a-0"
    assert [r.min_values for r in nc.requirements if r.key == FAMILY] == [3]


def test_truncation_that_cannot_meet_min_values_fails_the_claim_under_strict():
    types = family_types({"a": 2, "b": 2, "c": 2, "d": 2})
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=4)])
    plan = run([pod("p"), pod("q")], pools=[fam], types=types, max_instance_types=3)
    assert not plan.new_node_claims
    for name in ("p", "q"):
        reason = error_of(plan, name)
        assert "minValues" in reason
        assert f"{FAMILY} minValues 4" in reason


def test_truncation_best_effort_relaxes_min_values():
    types = family_types({"a": 2, "b": 2, "c": 2, "d": 2})
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=4)])
    plan = run(
        [pod("p")], pools=[fam], types=types, max_instance_types=3, min_values_policy="BestEffort"
    )
    nc = claim_of(plan, "p")
    assert len(nc.instance_types) == 3
    assert [r.min_values for r in nc.requirements if r.key == FAMILY] == [2]
    assert nc.annotations["karpenter.sh/nodeclaim-min-values-relaxed"] == "true"


def test_min_values_strict_fails_when_too_few_distinct_values_remain():
    types = family_types({"a": 2, "b": 2})
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=2)])
    plan = run(
        [pod("free"), pod("pinned", "1", nodeSelector={FAMILY: "a"})], pools=[fam], types=types
    )
    assert (
        claim_of(plan, "free").annotations["karpenter.sh/nodeclaim-min-values-relaxed"] == "false"
    )
    reason = error_of(plan, "pinned")
    assert f"minValues 2 for {FAMILY}" in reason


def test_min_values_best_effort_lowers_min_values_and_annotates():
    types = family_types({"a": 2, "b": 2})
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=2)])
    plan = run(
        [pod("pinned", "1", nodeSelector={FAMILY: "a"})],
        pools=[fam],
        types=types,
        min_values_policy="BestEffort",
    )
    nc = claim_of(plan, "pinned")
    assert [r.min_values for r in nc.requirements if r.key == FAMILY] == [1]
    assert nc.annotations["karpenter.sh/nodeclaim-min-values-relaxed"] == "true"


def test_min_values_unreachable_by_the_whole_pool():
    types = family_types({"a": 3})
    fam = pool(requirements=[sel(FAMILY, "Exists", mv=2)])
    plan = run([pod("p")], pools=[fam], types=types)
    assert "minValues 2" in error_of(plan, "p")
