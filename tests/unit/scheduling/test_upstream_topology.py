"""Cases ported from upstream's provisioning/scheduling/topology_test.go (same scenario, same
expected outcome), so a divergence from upstream semantics shows up by name."""

from __future__ import annotations

from collections import Counter
from typing import Any

from karpenter_py.model.core import SelectorRequirement
from tests.unit.scheduling._helpers import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    by_pod,
    claim_of,
    existing,
    itype,
    make_node,
    pod,
    pool,
    run,
    spread,
)

LABELS = {"test": "test"}
S2 = {"security": "s2"}
TYPES = [
    itype("amd-2", 2, 4),
    itype("amd-8", 8, 16),
    itype("arm-2", 2, 4, arch="arm64"),
    itype("arm-8", 8, 16, arch="arm64"),
]


def skew(plan: Any, key: str = ZONE, labels: dict[str, str] = LABELS) -> list[int]:
    """Matching pods per domain (new claims and existing-node placements), like ExpectSkew."""
    counts: Counter[str] = Counter()
    for nc in plan.new_node_claims:
        for p in nc.pods:
            if all(p.labels.get(k) == v for k, v in labels.items()):
                counts[nc.labels[key]] += 1
    return sorted(counts.values())


def required_zone(*zones: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}
                ]
            }
        }
    }


def term(labels: dict[str, str], key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def tsc_pods(n: int, *, prefix: str = "p", cpu: str = "100m", **spec: Any) -> list[Any]:
    tsc = spec.pop("tsc", [spread(ZONE, LABELS)])
    return [
        pod(f"{prefix}{i}", cpu, labels=LABELS, topologySpreadConstraints=tsc, **spec)
        for i in range(n)
    ]


def test_should_balance_pods_across_zones():
    assert skew(run(tsc_pods(4), types=TYPES)) == [1, 1, 2]


def test_should_respect_nodepool_zonal_constraints_subset():
    zone12 = pool(requirements=[SelectorRequirement(ZONE, "In", ("zone-a", "zone-b"))])
    assert skew(run(tsc_pods(4), pools=[zone12], types=TYPES)) == [2, 2]


def test_should_respect_nodepool_zonal_constraints_subset_with_labels():
    zone1 = pool(labels={ZONE: "zone-a"})
    assert skew(run(tsc_pods(4), pools=[zone1], types=TYPES)) == [4]


def test_should_respect_zonal_constraints_across_nodepools():
    pools = [
        pool(
            "one",
            labels={ZONE: "zone-a"},
            requirements=[SelectorRequirement(ZONE, "In", ("zone-a", "zone-b"))],
        ),
        pool("two", labels={ZONE: "zone-b"}),
    ]
    assert skew(run(tsc_pods(4), pools=pools, types=TYPES)) == [2, 2]


def test_should_schedule_to_the_non_minimum_domain_if_its_all_thats_available():
    zone3 = pool(requirements=[SelectorRequirement(ZONE, "In", ("zone-c",))])
    nodes = [
        existing(
            make_node(f"n-{z}", cpu="10m", labels={ZONE: z}),
            [pod(f"old-{z}", None, None, labels=LABELS)],
        )
        for z in ("zone-a", "zone-b")
    ]
    plan = run(
        tsc_pods(10, cpu="1100m", tsc=[spread(ZONE, LABELS, skew=5)]),
        pools=[zone3],
        existing=nodes,
        types=TYPES,
    )
    # max skew of 5: zone-a/b hold one pod each, zone-c takes 6 and the rest fail
    assert skew(plan) == [6]
    assert len(plan.errors) == 4


def test_should_limit_spread_options_by_required_node_affinity():
    plan = run(tsc_pods(6, affinity=required_zone("zone-a", "zone-b")), types=TYPES)
    assert skew(plan) == [3, 3]
    # the next batch sees those six pods on real nodes
    nodes = [
        existing(
            make_node(f"n-{z}", cpu="10m", labels={ZONE: z}),
            [pod(f"old-{z}-{i}", None, None, labels=LABELS) for i in range(3)],
        )
        for z in ("zone-a", "zone-b")
    ]
    plan = run(tsc_pods(1, affinity=required_zone("zone-b", "zone-c")), existing=nodes, types=TYPES)
    # it goes to the empty zone-c even though max skew is violated, as that improves the skew
    assert [nc.labels[ZONE] for nc in plan.new_node_claims] == ["zone-c"]
    nodes.append(
        existing(
            make_node("n-zone-c", cpu="10m", labels={ZONE: "zone-c"}),
            [pod("old-c", None, None, labels=LABELS)],
        )
    )
    plan = run(tsc_pods(5), existing=nodes, types=TYPES)
    assert Counter(nc.labels[ZONE] for nc in plan.new_node_claims for _ in nc.pods) == {
        "zone-a": 1,
        "zone-b": 1,
        "zone-c": 3,
    }


def test_should_not_limit_spread_options_by_preferred_node_affinity():
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}
                        ]
                    },
                }
            ]
        }
    }
    assert skew(run(tsc_pods(6, affinity=pref), types=TYPES)) == [2, 2, 2]


def test_should_limit_capacity_type_spread_by_node_selector():
    tsc = [spread(CAPACITY_TYPE, LABELS, when="ScheduleAnyway")]
    pods = tsc_pods(5, prefix="s", tsc=tsc, nodeSelector={CAPACITY_TYPE: "spot"}) + tsc_pods(
        5, prefix="o", tsc=tsc, nodeSelector={CAPACITY_TYPE: "on-demand"}
    )
    assert skew(run(pods, types=TYPES), CAPACITY_TYPE) == [5, 5]


def test_should_limit_capacity_type_spread_by_node_affinity():
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
                        ]
                    }
                ]
            }
        }
    }
    plan = run(tsc_pods(3, tsc=[spread(CAPACITY_TYPE, LABELS)], affinity=aff), types=TYPES)
    assert skew(plan, CAPACITY_TYPE) == [3]


def test_should_respect_pod_affinity_hostname_alongside_spread_pods():
    pods = [
        *tsc_pods(10, tsc=[spread(HOSTNAME, LABELS)]),
        pod("aff1", labels=S2),
        pod(
            "aff2",
            affinity={
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term(S2, HOSTNAME)]
                }
            },
        ),
    ]
    placements = by_pod(run(pods, types=TYPES))
    assert placements["aff1"] == placements["aff2"]


def test_should_respect_pod_affinity_arch():
    tsc = [spread(HOSTNAME, S2)]
    aff1 = pod("aff1", "2", labels=S2, topologySpreadConstraints=tsc, nodeSelector={ARCH: "arm64"})
    aff2 = pod(
        "aff2",
        "1",
        labels=S2,
        topologySpreadConstraints=tsc,
        affinity={
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ARCH)]}
        },
    )
    plan = run([aff1, aff2], types=TYPES)
    n1, n2 = claim_of(plan, "aff1"), claim_of(plan, "aff2")
    assert n1.labels[ARCH] == n2.labels[ARCH] == "arm64"
    assert n1 is not n2


def test_should_not_violate_pod_anti_affinity_arch():
    tsc = [spread(HOSTNAME, S2)]
    aff1 = pod("aff1", "2", labels=S2, topologySpreadConstraints=tsc, nodeSelector={ARCH: "arm64"})
    aff2 = pod(
        "aff2",
        "1",
        labels=S2,
        topologySpreadConstraints=tsc,
        affinity={
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ARCH)]}
        },
    )
    plan = run([aff1, aff2], types=TYPES)
    assert claim_of(plan, "aff1").labels[ARCH] != claim_of(plan, "aff2").labels[ARCH]


def test_should_respect_self_pod_affinity_for_first_empty_domain_only():
    small_nodes = [itype("five-pods", 8, 16, pods=5)]
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, HOSTNAME)]}}
    plan = run([pod(f"p{i}", labels=S2, affinity=aff) for i in range(10)], types=small_nodes)
    assert len(plan.new_node_claims) == 1
    assert len(plan.new_node_claims[0].pods) == 5
    assert len(plan.errors) == 5


def test_should_respect_self_pod_affinity_first_domain_with_constrained_zones():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, HOSTNAME)]}}
    node = existing(
        make_node("n-zone-a", cpu="10m", labels={ZONE: "zone-a"}),
        [pod("old", None, None, labels=S2, affinity=aff)],
    )
    pods = [
        pod(f"p{i}", labels=S2, affinity={**aff, **required_zone("zone-b", "zone-c")})
        for i in range(3)
    ]
    plan = run(pods, existing=[node], types=TYPES)
    assert len(plan.errors) == 3
    assert not plan.new_node_claims


def test_should_not_violate_pod_anti_affinity_on_zone_other_schedules_first():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ZONE)]}}
    plan = run([pod("target", "2", labels=S2), pod("aff", affinity=anti)], types=TYPES)
    placements = by_pod(plan)
    assert "target" in placements
    assert "aff" not in placements


def test_should_violate_preferred_pod_anti_affinity_on_zone_inverse():
    anti = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term(S2, ZONE)}
            ]
        }
    }
    pods = [
        pod(f"z-{z}", "2", affinity=anti, nodeSelector={ZONE: z})
        for z in ("zone-a", "zone-b", "zone-c")
    ]
    plan = run([*pods, pod("aff", labels=S2)], types=TYPES)
    assert not plan.errors


def test_should_not_violate_pod_anti_affinity_on_zone_inverse():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ZONE)]}}
    pods = [
        pod(f"z-{z}", "2", affinity=anti, nodeSelector={ZONE: z})
        for z in ("zone-a", "zone-b", "zone-c")
    ]
    plan = run([*pods, pod("aff", labels=S2)], types=TYPES)
    assert [e.pod.name for e in plan.errors] == ["aff"]


def test_should_not_violate_pod_anti_affinity_on_zone_inverse_with_existing_nodes():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ZONE)]}}
    nodes = [
        existing(
            make_node(f"n-{z}", cpu="8", labels={ZONE: z}), [pod(f"z-{z}", "2", affinity=anti)]
        )
        for z in ("zone-a", "zone-b", "zone-c")
    ]
    plan = run([pod("aff", labels=S2)], existing=nodes, types=TYPES)
    assert [e.pod.name for e in plan.errors] == ["aff"]


def test_should_not_violate_pod_anti_affinity_on_zone_schroedinger():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(S2, ZONE)]}}
    plan = run([pod("anywhere", "2", affinity=anti), pod("aff", labels=S2)], types=TYPES)
    assert [e.pod.name for e in plan.errors] == ["aff"]
