"""Topology spread constraints: keys, maxSkew, minDomains, policies, matchLabelKeys, existing pods."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from karpenter_py.model.core import SelectorRequirement
from tests.unit.scheduling._helpers import (
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    by_pod,
    error_of,
    existing,
    itype,
    make_node,
    pod,
    pool,
    req_values,
    run,
    spread,
    taint,
    zone_counts,
)

APP = {"app": "web"}


def web(n: int, *constraints: dict[str, Any], cpu: str = "100m", **spec: Any) -> list[Any]:
    return [
        pod(f"web-{i}", cpu, labels=APP, topologySpreadConstraints=list(constraints), **spec)
        for i in range(n)
    ]


def placed_counts(plan: Any, key: str = ZONE) -> Counter[str]:
    return zone_counts(plan, key)


# ----------------------------------------------------------------------------- keys


def test_zone_spread_max_skew_1_spreads_six_pods_two_per_zone():
    plan = run(web(6, spread(ZONE, APP)))
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


@pytest.mark.parametrize(("n", "expected"), [(4, [1, 1, 2]), (5, [1, 2, 2]), (7, [2, 2, 3])])
def test_zone_spread_uneven_counts(n, expected):
    plan = run(web(n, spread(ZONE, APP)))
    assert sorted(placed_counts(plan).values()) == expected


def test_zone_spread_max_skew_2():
    # one zone is cheaper, but skew 2 still bounds how far it can run ahead
    types = [itype("t", 4, 8, zone_prices={"zone-a": 0.1, "zone-b": 0.2, "zone-c": 0.3})]
    plan = run(web(9, spread(ZONE, APP, skew=2)), types=types)
    counts = placed_counts(plan)
    assert sum(counts.values()) == 9
    assert max(counts.values()) - min(counts.values()) <= 2


@pytest.mark.parametrize(("skew", "nodes"), [(1, 6), (2, 3), (3, 2)])
def test_hostname_spread(skew, nodes):
    plan = run(web(6, spread(HOSTNAME, APP, skew=skew)))
    assert not plan.errors
    assert len(plan.new_node_claims) == nodes
    assert all(len(nc.pods) <= skew for nc in plan.new_node_claims)


def test_capacity_type_spread():
    plan = run(web(4, spread(CAPACITY_TYPE, APP)))
    assert not plan.errors
    assert placed_counts(plan, CAPACITY_TYPE) == {"spot": 2, "on-demand": 2}
    for nc in plan.new_node_claims:
        assert req_values(nc, CAPACITY_TYPE) == (nc.labels[CAPACITY_TYPE],)
        assert nc.offering.capacity_type == nc.labels[CAPACITY_TYPE]


def test_custom_label_spread_uses_nodepool_requirement_values_as_domains():
    team = pool(requirements=[SelectorRequirement("team", "In", ("a", "b"))])
    plan = run(web(4, spread("team", APP)), pools=[team])
    assert not plan.errors
    assert placed_counts(plan, "team") == {"a": 2, "b": 2}
    for nc in plan.new_node_claims:
        assert nc.labels["team"] in ("a", "b")


def test_custom_label_spread_over_instance_type_label_values():
    types = [
        itype("gen5", 2, 4, labels={"example.com/gen": "5"}),
        itype("gen6", 2, 4, labels={"example.com/gen": "6"}, price=0.5),
    ]
    gen = pool(requirements=[SelectorRequirement("example.com/gen", "Exists", ())])
    plan = run(web(4, spread("example.com/gen", APP)), pools=[gen], types=types)
    assert not plan.errors
    assert Counter(nc.instance_type.name for nc in plan.new_node_claims for _ in nc.pods) == {
        "gen5": 2,
        "gen6": 2,
    }


def test_unknown_topology_key_is_unschedulable():
    plan = run(web(1, spread("example.com/rack", APP)))
    assert "topology spread" in error_of(plan, "web-0")


def test_spread_counts_only_selected_pods():
    other = [pod(f"other-{i}", labels={"app": "db"}) for i in range(5)]
    plan = run([*web(3, spread(ZONE, APP)), *other])
    assert not plan.errors
    web_zones = Counter(
        nc.labels[ZONE] for nc in plan.new_node_claims for p in nc.pods if p.labels == APP
    )
    assert web_zones == {"zone-a": 1, "zone-b": 1, "zone-c": 1}


# ----------------------------------------------------------------------------- minDomains / skew


def test_min_domains_above_domain_count_keeps_global_minimum_at_zero():
    plan = run(web(6, spread(ZONE, APP, minDomains=5)))
    placed = placed_counts(plan)
    assert placed == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    assert len(plan.errors) == 3
    for e in plan.errors:
        assert "topology spread constraint on topology.kubernetes.io/zone" in e.reason


def test_min_domains_satisfied_behaves_like_plain_skew():
    plan = run(web(6, spread(ZONE, APP, minDomains=3)))
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


# Two pools: "cheap" can only launch in zone-a; "tainted" offers zone-b/zone-c but the pods do not
# tolerate its taint. The tainted pool's zones are still domains (nodeTaintsPolicy Ignore).
ZONE_A_ONLY = [
    pool("cheap", weight=10, requirements=[SelectorRequirement(ZONE, "In", ("zone-a",))]),
    pool("tainted", taints=[taint("dedicated")]),
]


def test_do_not_schedule_cannot_exceed_skew_when_other_domains_are_unreachable():
    plan = run(web(4, spread(ZONE, APP)), pools=ZONE_A_ONLY)
    assert placed_counts(plan) == {"zone-a": 1}
    assert len(plan.errors) == 3
    assert "topology spread" in plan.errors[0].reason


def test_schedule_anyway_is_relaxed():
    plan = run(web(4, spread(ZONE, APP, when="ScheduleAnyway")), pools=ZONE_A_ONLY)
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 4}


def test_schedule_anyway_is_respected_while_it_can_be():
    plan = run(web(6, spread(ZONE, APP, when="ScheduleAnyway")))
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


def test_schedule_anyway_is_dropped_under_preference_policy_ignore():
    types = [itype("t", 4, 8, zone_prices={"zone-a": 0.1, "zone-b": 0.2, "zone-c": 0.3})]
    plan = run(web(6, spread(ZONE, APP, when="ScheduleAnyway")), types=types, policy="Ignore")
    assert not plan.errors
    assert [nc.labels[ZONE] for nc in plan.new_node_claims] == ["zone-a"]


def test_node_taints_policy_honor_drops_untolerated_domains():
    plan = run(web(4, spread(ZONE, APP, nodeTaintsPolicy="Honor")), pools=ZONE_A_ONLY)
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 4}


def test_node_taints_policy_honor_keeps_tolerated_domains():
    tol = [{"key": "dedicated", "operator": "Exists"}]
    plan = run(
        web(4, spread(ZONE, APP, nodeTaintsPolicy="Honor"), tolerations=tol), pools=ZONE_A_ONLY
    )
    assert not plan.errors
    assert sorted(placed_counts(plan).values()) == [1, 1, 2]


def test_node_taints_policy_honor_ignores_pods_on_untolerated_nodes():
    tainted = existing(
        make_node(
            "n1", labels={ZONE: "zone-a"}, taints=[{"key": "dedicated", "effect": "NoSchedule"}]
        ),
        [pod(f"old-{i}", labels=APP) for i in range(3)],
    )
    honor = run(web(3, spread(ZONE, APP, nodeTaintsPolicy="Honor")), existing=[tainted])
    assert placed_counts(honor) == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    ignore = run(web(3, spread(ZONE, APP)), existing=[tainted])
    # zone-a already holds three matching pods: the new ones go to b and c first
    assert placed_counts(ignore) == {"zone-b": 2, "zone-c": 1}


def test_required_zone_affinity_limits_domains_for_the_skew():
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}
                        ]
                    }
                ]
            }
        }
    }
    plan = run(web(4, spread(ZONE, APP), affinity=aff))
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2}


def test_preferred_node_affinity_does_not_shrink_the_domains_of_a_hard_spread():
    """The skew is computed over the domains the pod *requires*, not the ones it prefers: a zone
    preference may bias placement but must never let one zone run more than maxSkew ahead."""
    aff = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]
                    },
                }
            ]
        }
    }
    plan = run(web(6, spread(ZONE, APP), affinity=aff))
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


# ----------------------------------------------------------------------------- nodeAffinityPolicy


TEAMS = [pool("team-a", labels={"team": "a"})]


def _existing_zone_c(labels: dict[str, str]) -> Any:
    return existing(
        make_node("old", labels={ZONE: "zone-c", **labels}),
        [pod(f"old-{i}", labels=APP) for i in range(2)],
    )


@pytest.mark.parametrize(
    ("policy", "node_labels", "expected"),
    [
        # Honor: pods on nodes the pod's nodeSelector does not match are not counted
        ("Honor", {"team": "b"}, {"zone-a": 1, "zone-b": 1, "zone-c": 1}),
        ("Honor", {}, {"zone-a": 1, "zone-b": 1, "zone-c": 1}),
        # Ignore: they are counted, so zone-c starts two ahead
        ("Ignore", {"team": "b"}, {"zone-a": 2, "zone-b": 1}),
        ("Ignore", {}, {"zone-a": 2, "zone-b": 1}),
    ],
)
def test_node_affinity_policy_decides_which_existing_pods_count(policy, node_labels, expected):
    pods = web(3, spread(ZONE, APP, nodeAffinityPolicy=policy), nodeSelector={"team": "a"})
    plan = run(pods, pools=TEAMS, existing=[_existing_zone_c(node_labels)])
    assert not plan.errors
    assert placed_counts(plan) == expected


def test_node_affinity_policy_honor_excludes_domains_only_other_pools_offer():
    pools = [
        pool(
            "ab",
            labels={"team": "a"},
            requirements=[SelectorRequirement(ZONE, "In", ("zone-a", "zone-b"))],
        ),
        pool(
            "c", labels={"team": "c"}, requirements=[SelectorRequirement(ZONE, "In", ("zone-c",))]
        ),
    ]
    pods = web(4, spread(ZONE, APP), nodeSelector={"team": "a"})
    plan = run(pods, pools=pools)
    assert not plan.errors
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2}


# ----------------------------------------------------------------------------- matchLabelKeys


def test_match_label_keys_spread_each_revision_separately():
    tsc = spread(ZONE, APP, matchLabelKeys=["pod-template-hash"])
    old = [
        pod(f"v1-{i}", labels={**APP, "pod-template-hash": "v1"}, topologySpreadConstraints=[tsc])
        for i in range(3)
    ]
    new = [
        pod(f"v2-{i}", labels={**APP, "pod-template-hash": "v2"}, topologySpreadConstraints=[tsc])
        for i in range(3)
    ]
    plan = run([*old, *new])
    assert not plan.errors
    for rev in ("v1", "v2"):
        zones = Counter(
            nc.labels[ZONE]
            for nc in plan.new_node_claims
            for p in nc.pods
            if p.labels.get("pod-template-hash") == rev
        )
        assert zones == {"zone-a": 1, "zone-b": 1, "zone-c": 1}, rev


def test_without_match_label_keys_revisions_share_one_spread():
    tsc = spread(ZONE, APP)
    pods = [
        pod(
            f"v{r}-{i}",
            labels={**APP, "pod-template-hash": f"v{r}"},
            topologySpreadConstraints=[tsc],
        )
        for r in (1, 2)
        for i in range(3)
    ]
    plan = run(pods)
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


# ----------------------------------------------------------------------------- existing pods


def test_existing_pods_on_existing_nodes_are_counted():
    full = existing(
        make_node("old", cpu="10m", labels={ZONE: "zone-a"}),
        [pod(f"old-{i}", None, None, labels=APP) for i in range(2)],
    )
    plan = run(web(4, spread(ZONE, APP)), existing=[full])
    assert not plan.errors
    assert placed_counts(plan) == {"zone-b": 2, "zone-c": 2}


def test_existing_node_zone_outside_the_pools_is_still_a_domain():
    """Upstream's 'should respect NodePool zonal constraints (existing pod)'."""
    zone_ab = pool(requirements=[SelectorRequirement(ZONE, "In", ("zone-a", "zone-b"))])
    full = existing(
        make_node("old", cpu="10m", labels={ZONE: "zone-c"}), [pod("old", None, None, labels=APP)]
    )
    plan = run(web(6, spread(ZONE, APP), cpu="1100m"), pools=[zone_ab], existing=[full])
    assert placed_counts(plan) == {"zone-a": 2, "zone-b": 2}
    assert len(plan.errors) == 2


def test_pods_landing_on_existing_nodes_count_too():
    room = existing(make_node("roomy", cpu="16", mem="32Gi", labels={ZONE: "zone-b"}))
    plan = run(web(3, spread(ZONE, APP)), existing=[room])
    assert not plan.errors
    placements = by_pod(plan)
    on_node = [p for p, where in placements.items() if where == "node/roomy"]
    assert len(on_node) == 1
    assert placed_counts(plan) == {"zone-a": 1, "zone-c": 1}


def test_terminating_existing_pods_are_not_counted():
    from dataclasses import replace

    leaving = [
        replace(pod(f"old-{i}", None, None, labels=APP), deletion_timestamp="2024-01-01T00:00:00Z")
        for i in range(2)
    ]
    node = existing(make_node("old", cpu="10m", labels={ZONE: "zone-a"}), leaving)
    plan = run(web(3, spread(ZONE, APP)), existing=[node])
    assert placed_counts(plan) == {"zone-a": 1, "zone-b": 1, "zone-c": 1}


def test_existing_node_without_the_topology_key_cannot_host_a_spread_pod():
    unlabeled = existing(make_node("bare", cpu="16", mem="32Gi"))
    plan = run([*web(1, spread(ZONE, APP)), pod("plain")], existing=[unlabeled])
    placements = by_pod(plan)
    assert placements["plain"] == "node/bare"
    assert placements["web-0"].startswith("claim-")
