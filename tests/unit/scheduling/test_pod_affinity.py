"""Pod affinity and anti-affinity: required and preferred, hostname and zone, namespaces, inverse."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.scheduling._helpers import (
    HOSTNAME,
    ZONE,
    by_pod,
    claim_of,
    error_of,
    existing,
    make_node,
    pod,
    req_values,
    run,
)

DB = {"app": "db"}
WEB = {"app": "web"}


def term(
    labels: dict[str, str],
    key: str,
    *,
    namespaces: list[str] | None = None,
    namespace_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}
    if namespaces is not None:
        out["namespaces"] = namespaces
    if namespace_selector is not None:
        out["namespaceSelector"] = namespace_selector
    return out


def affinity(kind: str, *terms: dict[str, Any], weight: int | None = None) -> dict[str, Any]:
    """kind: podAffinity | podAntiAffinity; weight set -> preferred terms."""
    if weight is None:
        return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": t} for t in terms
            ]
        }
    }


def zone(plan: Any, name: str) -> str:
    return claim_of(plan, name).labels[ZONE]


# ----------------------------------------------------------------------------- required affinity


@pytest.mark.parametrize("client_cpu", ["50m", "2"], ids=["target-first", "client-first"])
def test_required_hostname_affinity_puts_pods_together(client_cpu):
    pods = [
        pod("db", "500m", labels=DB),
        pod("client", client_cpu, affinity=affinity("podAffinity", term(DB, HOSTNAME))),
        pod("other", "500m"),
    ]
    plan = run(pods)
    assert not plan.errors
    placements = by_pod(plan)
    assert placements["client"] == placements["db"]


def test_required_zone_affinity_follows_the_target_zone():
    pods = [
        pod("db", "3", labels=DB, nodeSelector={ZONE: "zone-b"}),
        *[pod(f"c{i}", "3", affinity=affinity("podAffinity", term(DB, ZONE))) for i in range(3)],
    ]
    plan = run(pods)
    assert not plan.errors
    assert {zone(plan, n) for n in ("db", "c0", "c1", "c2")} == {"zone-b"}
    assert len(plan.new_node_claims) > 1  # too big for one node, but all in the target's zone


def test_self_affinity_on_zone_keeps_a_workload_in_one_zone():
    pods = [
        pod(f"w{i}", "3", labels=WEB, affinity=affinity("podAffinity", term(WEB, ZONE)))
        for i in range(5)
    ]
    plan = run(pods)
    assert not plan.errors
    assert len(plan.new_node_claims) >= 2
    assert len({nc.labels[ZONE] for nc in plan.new_node_claims}) == 1
    for nc in plan.new_node_claims:
        assert req_values(nc, ZONE) in (("zone-a",), ("zone-b",), ("zone-c",))


def test_affinity_to_a_pod_on_an_existing_node():
    node = existing(make_node("n1", cpu="4", labels={ZONE: "zone-c"}), [pod("db", labels=DB)])
    plan = run(
        [
            pod("host", affinity=affinity("podAffinity", term(DB, HOSTNAME))),
            pod("zonal", "6", affinity=affinity("podAffinity", term(DB, ZONE))),
        ],
        existing=[node],
    )
    assert not plan.errors
    assert by_pod(plan)["host"] == "node/n1"
    assert zone(plan, "zonal") == "zone-c"


def test_required_affinity_without_any_target_is_unschedulable():
    plan = run([pod("client", affinity=affinity("podAffinity", term(DB, HOSTNAME)))])
    reason = error_of(plan, "client")
    assert "pod affinity on kubernetes.io/hostname" in reason


# ----------------------------------------------------------------------------- preferred affinity


def test_preferred_affinity_respected_when_possible():
    pods = [
        pod("db", "500m", labels=DB),
        pod("filler", "600m"),
        pod("client", "100m", affinity=affinity("podAffinity", term(DB, HOSTNAME), weight=10)),
    ]
    plan = run(pods)
    placements = by_pod(plan)
    assert placements["client"] == placements["db"]


def test_preferred_affinity_relaxed_when_impossible():
    plan = run([pod("client", affinity=affinity("podAffinity", term(DB, HOSTNAME), weight=10))])
    assert not plan.errors
    assert by_pod(plan)["client"].startswith("claim-")


def test_preferred_affinity_ignored_under_preference_policy_ignore():
    pods = [
        pod("db", "1500m", labels=DB, nodeSelector={ZONE: "zone-c"}),
        pod("client", "1", affinity=affinity("podAffinity", term(DB, ZONE), weight=10)),
    ]
    respect = run(pods)
    assert zone(respect, "client") == "zone-c"
    ignore = run(pods, policy="Ignore")
    assert by_pod(ignore)["client"] == by_pod(ignore)["db"] or zone(ignore, "client") == "zone-a"


# ----------------------------------------------------------------------------- required anti-affinity


def test_required_hostname_anti_affinity_one_pod_per_node():
    pods = [
        pod(f"w{i}", labels=WEB, affinity=affinity("podAntiAffinity", term(WEB, HOSTNAME)))
        for i in range(4)
    ]
    plan = run(pods)
    assert not plan.errors
    assert len(plan.new_node_claims) == 4
    assert all(len(nc.pods) == 1 for nc in plan.new_node_claims)


def test_required_zone_anti_affinity_with_pinned_zones():
    anti = affinity("podAntiAffinity", term(WEB, ZONE))
    pods = [
        pod(f"w-{z}", "1", labels=WEB, nodeSelector={ZONE: z}, affinity=anti)
        for z in ("zone-a", "zone-b", "zone-c")
    ]
    pods.append(pod("w-extra", "100m", labels=WEB, affinity=anti))
    plan = run(pods)
    assert {zone(plan, f"w-{z}") for z in ("zone-a", "zone-b", "zone-c")} == {
        "zone-a",
        "zone-b",
        "zone-c",
    }
    assert "anti-affinity" in error_of(plan, "w-extra")


def test_required_zone_anti_affinity_blocks_every_zone_an_unpinned_node_may_land_in():
    """Upstream's late committal: an unpinned NodeClaim may land in any of its zones, so a pod with
    zonal self anti-affinity blocks all of them and only one such pod schedules per batch."""
    anti = affinity("podAntiAffinity", term(WEB, ZONE))
    plan = run([pod(f"w{i}", labels=WEB, affinity=anti) for i in range(3)])
    assert len(plan.new_node_claims) == 1
    assert len(plan.errors) == 2
    for e in plan.errors:
        assert "pod anti-affinity on topology.kubernetes.io/zone" in e.reason


def test_anti_affinity_against_other_pods_on_hostname():
    pods = [
        pod("db", "1", labels=DB),
        pod("web", "500m", labels=WEB, affinity=affinity("podAntiAffinity", term(DB, HOSTNAME))),
    ]
    plan = run(pods)
    assert not plan.errors
    placements = by_pod(plan)
    assert placements["web"] != placements["db"]


# ----------------------------------------------------------------------------- preferred anti-affinity


def test_preferred_hostname_anti_affinity_respected():
    pods = [
        pod(
            f"w{i}", labels=WEB, affinity=affinity("podAntiAffinity", term(WEB, HOSTNAME), weight=5)
        )
        for i in range(3)
    ]
    plan = run(pods)
    assert not plan.errors
    assert len(plan.new_node_claims) == 3


def test_preferred_zone_anti_affinity_relaxed():
    anti = affinity("podAntiAffinity", term(WEB, ZONE), weight=5)
    plan = run([pod(f"w{i}", labels=WEB, affinity=anti) for i in range(4)])
    assert not plan.errors
    assert sum(len(nc.pods) for nc in plan.new_node_claims) == 4


# ----------------------------------------------------------------------------- inverse anti-affinity


def test_existing_pod_anti_affinity_keeps_new_pods_off_its_node():
    guard = pod("guard", labels=DB, affinity=affinity("podAntiAffinity", term(WEB, HOSTNAME)))
    node = existing(make_node("n1", cpu="8", labels={ZONE: "zone-a"}), [guard])
    plan = run([pod("web", labels=WEB), pod("plain")], existing=[node])
    placements = by_pod(plan)
    assert placements["plain"] == "node/n1"
    assert placements["web"].startswith("claim-")


def test_existing_pod_zone_anti_affinity_keeps_new_pods_out_of_its_zone():
    guard = pod("guard", labels=DB, affinity=affinity("podAntiAffinity", term(WEB, ZONE)))
    node = existing(make_node("n1", cpu="8", labels={ZONE: "zone-a"}), [guard])
    plan = run([pod("web", labels=WEB)], existing=[node])
    nc = claim_of(plan, "web")
    assert req_values(nc, ZONE) == ("zone-b", "zone-c")
    assert nc.labels[ZONE] in ("zone-b", "zone-c")


def test_existing_pod_preferred_anti_affinity_is_not_enforced_on_others():
    guard = pod(
        "guard", labels=DB, affinity=affinity("podAntiAffinity", term(WEB, HOSTNAME), weight=9)
    )
    node = existing(make_node("n1", cpu="8"), [guard])
    plan = run([pod("web", labels=WEB)], existing=[node])
    assert by_pod(plan)["web"] == "node/n1"


def test_new_pod_anti_affinity_keeps_later_pods_off_its_claim():
    pods = [
        pod("guard", "1", labels=DB, affinity=affinity("podAntiAffinity", term(WEB, HOSTNAME))),
        pod("web", "100m", labels=WEB),
        pod("plain", "100m"),
    ]
    plan = run(pods)
    placements = by_pod(plan)
    assert placements["plain"] == placements["guard"]
    assert placements["web"] != placements["guard"]


def test_inverse_anti_affinity_unschedulable_reason():
    guard = pod("guard", labels=DB, affinity=affinity("podAntiAffinity", term(WEB, ZONE)))
    nodes = [
        existing(make_node(f"n-{z}", cpu="8", labels={ZONE: z}), [guard] if z == "zone-a" else [])
        for z in ("zone-a",)
    ]
    plan = run([pod("web", labels=WEB, nodeSelector={ZONE: "zone-a"})], existing=nodes)
    assert "existing pod's anti-affinity" in error_of(plan, "web")


# ----------------------------------------------------------------------------- namespaces


def _two_dbs() -> list[Any]:
    return [
        pod("db-default", "1", labels=DB, nodeSelector={ZONE: "zone-a"}),
        pod("db-other", "1", ns="other", labels=DB, nodeSelector={ZONE: "zone-b"}),
    ]


@pytest.mark.parametrize(
    ("term_kwargs", "namespace_labels", "expected_zone"),
    [
        ({}, None, "zone-a"),  # default: the pod's own namespace
        ({"namespaces": ["other"]}, None, "zone-b"),
        (
            {"namespace_selector": {"matchLabels": {"team": "x"}}},
            {"other": {"team": "x"}},
            "zone-b",
        ),
        (
            {"namespace_selector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}},
            None,
            "zone-b",
        ),
    ],
)
def test_affinity_namespaces(term_kwargs, namespace_labels, expected_zone):
    client = pod("client", "100m", affinity=affinity("podAffinity", term(DB, ZONE, **term_kwargs)))
    plan = run([*_two_dbs(), client], namespace_labels=namespace_labels)
    assert not plan.errors
    assert zone(plan, "client") == expected_zone


def test_empty_namespace_selector_matches_every_namespace():
    anti = affinity("podAntiAffinity", term(DB, HOSTNAME, namespace_selector={}))
    guard = pod("db", labels=DB)
    nodes = [existing(make_node("n1", cpu="8"), [guard])]
    plan = run([pod("client", ns="elsewhere", affinity=anti)], existing=nodes)
    assert by_pod(plan)["client"].startswith("claim-")


def test_anti_affinity_is_scoped_to_the_pods_namespace_by_default():
    guard = pod("db", ns="other", labels=DB)
    nodes = [existing(make_node("n1", cpu="8"), [guard])]
    anti = affinity("podAntiAffinity", term(DB, HOSTNAME))
    plan = run([pod("client", affinity=anti)], existing=nodes)
    assert by_pod(plan)["client"] == "node/n1"
