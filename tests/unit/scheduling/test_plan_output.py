"""What the plan says: NodeClaim labels and requirements, actionable reasons, relaxation order,
and determinism."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.fakecatalog import fake_instance_types
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions
from karpenter_py.scheduling.plan import Plan
from karpenter_py.scheduling.scheduler import solve
from tests.unit.scheduling._helpers import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    NODEPOOL,
    OS,
    ZONE,
    claim_of,
    error_of,
    itype,
    pod,
    pool,
    req_values,
    run,
    spread,
    taint,
)


def sel(key: str, op: str, *values: str) -> SelectorRequirement:
    return SelectorRequirement(key, op, values)


# ----------------------------------------------------------------------------- labels / requirements


def test_node_claim_labels_and_requirements():
    p = pool(
        "gold",
        labels={"team": "a"},
        annotations={"example.com/owner": "me"},
        requirements=[
            sel("example.com/tier", "In", "gold"),
            sel(ZONE, "In", "zone-a", "zone-b"),
            sel("example.com/rack", "In", "r1", "r2"),
        ],
        taints=[taint("dedicated", value="gold")],
    )
    types = [itype("small", 2, 4, labels={"example.com/gen": "5"}), itype("medium", 4, 8)]
    tol = [{"key": "dedicated", "operator": "Exists"}]
    plan = run(
        [pod("p", tolerations=tol, nodeSelector={"example.com/rack": "r2"})], pools=[p], types=types
    )
    nc = claim_of(plan, "p")
    labels = dict(nc.labels)
    assert labels["team"] == "a"
    assert labels[NODEPOOL] == "gold"
    assert labels[INSTANCE_TYPE] == "small"
    assert labels[ZONE] == "zone-a" == nc.offering.zone
    assert labels[CAPACITY_TYPE] == "spot" == nc.offering.capacity_type
    assert labels[ARCH] == "amd64"
    assert labels[OS] == "linux"
    assert labels["example.com/tier"] == "gold"  # single-valued pool requirement
    assert labels["example.com/rack"] == "r2"  # narrowed to one value by the pod
    assert labels["example.com/gen"] == "5"  # single-valued label of the chosen type
    assert HOSTNAME not in labels
    assert nc.annotations["example.com/owner"] == "me"

    keys = [r.key for r in nc.requirements]
    assert HOSTNAME not in keys
    assert keys == sorted(keys)
    assert req_values(nc, INSTANCE_TYPE) == ("medium", "small")
    assert req_values(nc, NODEPOOL) == ("gold",)
    assert req_values(nc, ZONE) == ("zone-a", "zone-b")
    assert req_values(nc, "example.com/rack") == ("r2",)
    assert req_values(nc, CAPACITY_TYPE) == ("on-demand", "spot")
    assert nc.taints == (taint("dedicated", value="gold"),)
    assert [it.name for it in nc.instance_types] == ["small", "medium"]
    assert nc.instance_type.name == "small"
    assert nc.requests == {"cpu": 100, "memory": 128 * 2**20, "pods": 1}


def test_node_class_label():
    p = pool(node_class_ref=("karpenter.k8s.aws", "EC2NodeClass", "default"))
    plan = run(
        [
            pod("p"),
            pod("wants-it", "3", nodeSelector={"karpenter.k8s.aws/ec2nodeclass": "default"}),
            pod("wants-other", nodeSelector={"karpenter.k8s.aws/ec2nodeclass": "gpu"}),
        ],
        pools=[p],
    )
    nc = claim_of(plan, "p")
    assert nc.labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert req_values(nc, "karpenter.k8s.aws/ec2nodeclass") == ("default",)
    assert claim_of(plan, "wants-it").node_pool == "default"
    assert "karpenter.k8s.aws/ec2nodeclass" in error_of(plan, "wants-other")


def test_claim_requirements_keep_operators_and_bounds():
    p = pool(
        requirements=[
            sel("example.com/rank", "Gt", "2"),
            sel("example.com/zone-group", "NotIn", "bad"),
            sel("example.com/gpu", "DoesNotExist"),
        ]
    )
    types = [
        itype("r3", 2, 4, labels={"example.com/rank": "3"}),
        itype("r1", 2, 4, labels={"example.com/rank": "1"}, price=0.01),
    ]
    plan = run([pod("p")], pools=[p], types=types)
    nc = claim_of(plan, "p")
    ops = {r.key: (r.operator, r.values) for r in nc.requirements}
    assert ops["example.com/rank"] == ("Gt", ("2",))
    assert ops["example.com/zone-group"] == ("NotIn", ("bad",))
    assert ops["example.com/gpu"] == ("DoesNotExist", ())
    assert [it.name for it in nc.instance_types] == ["r3"]


def test_pods_are_named_on_their_claim_and_existing_placements():
    plan = run([pod("a", "1"), pod("b", "1")])
    assert [p.name for nc in plan.new_node_claims for p in nc.pods] == ["a", "b"]
    assert plan.placed_pods() == 2


# ----------------------------------------------------------------------------- reasons


def _no_types_pool() -> Any:
    return {"pools": [pool()], "types": {"default": []}}


ANTI_WEB = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
        ]
    }
}
AFF_DB = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}
        ]
    }
}


@pytest.mark.parametrize(
    ("pods", "kwargs", "fragments"),
    [
        pytest.param(
            [pod("x")],
            {"pools": [pool(taints=[taint("gpu")])]},
            ["did not tolerate taint gpu:NoSchedule"],
            id="taint",
        ),
        pytest.param(
            [pod("x", "64")],
            {},
            ["no instance type has enough resources", "cpu 64 > largest 8"],
            id="resources",
        ),
        pytest.param(
            [pod("x", nodeSelector={"team": "a"})],
            {},
            ['label "team" does not have known values'],
            id="custom-label",
        ),
        pytest.param(
            [pod("x", nodeSelector={ZONE: "zone-x"})],
            {},
            ["topology.kubernetes.io/zone", "zone-x"],
            id="zone",
        ),
        pytest.param(
            [pod("x", nodeSelector={ARCH: "arm64"})],
            {},
            [
                "no instance type with an available offering matches",
                "kubernetes.io/arch In [arm64]",
            ],
            id="no-matching-type",
        ),
        pytest.param(
            [
                pod(
                    "x",
                    labels={"app": "web"},
                    topologySpreadConstraints=[spread("example.com/none", {"app": "web"})],
                )
            ],
            {},
            [
                "topology spread on example.com/none",
                "no NodePool, instance type or node has a value",
            ],
            id="spread",
        ),
        pytest.param(
            [pod("x", affinity=AFF_DB)],
            {},
            ["pod affinity on kubernetes.io/hostname"],
            id="affinity",
        ),
        pytest.param(
            [pod(f"x{i}", labels={"app": "web"}, affinity=ANTI_WEB) for i in range(2)],
            {},
            ["pod anti-affinity on topology.kubernetes.io/zone"],
            id="anti-affinity",
        ),
        pytest.param([pod("x")], {"pools": [pool(limits={"cpu": "1"})]}, ["limits"], id="limits"),
        pytest.param([pod("x")], {"pools": []}, ["no NodePools"], id="no-pools"),
        pytest.param([pod("x")], _no_types_pool(), ["has no usable instance types"], id="no-types"),
    ],
)
def test_every_unplaced_pod_has_an_actionable_reason(pods, kwargs, fragments):
    plan = run(pods, **kwargs)
    assert plan.errors, "expected an unplaced pod"
    for e in plan.errors:
        assert e.reason
        assert "unchanged since last check" not in e.reason
    reason = plan.errors[-1].reason
    for fragment in fragments:
        assert fragment in reason, reason


def test_pool_whose_requirements_reject_every_type_says_why():
    p = pool(requirements=[sel(ZONE, "In", "zone-x")])
    plan = run([pod("x")], pools=[p])
    reason = error_of(plan, "x")
    assert "has no usable instance types (3 rejected" in reason
    assert "zone" in reason


def test_reason_lists_every_pool_when_all_are_incompatible():
    pools = [
        pool("gpu", taints=[taint("gpu")]),
        pool("arm", requirements=[sel(ARCH, "In", "arm64")]),
    ]
    plan = run([pod("x")], pools=pools)
    reason = error_of(plan, "x")
    assert reason.startswith("incompatible with every nodepool")
    assert 'nodepool "gpu": did not tolerate taint gpu:NoSchedule' in reason
    assert 'nodepool "arm"' in reason


def test_relaxation_order_is_upstreams():
    """Everything relaxable is relaxed, in upstream's order, before the pod is given up on."""
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-x"]}]},
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-y"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": ARCH, "operator": "In", "values": ["arm64"]}]
                    },
                }
            ],
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "topologyKey": HOSTNAME,
                    },
                }
            ]
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "topologyKey": HOSTNAME,
                    },
                }
            ]
        },
    }
    p = pod(
        "x",
        labels={"app": "x"},
        affinity=aff,
        topologySpreadConstraints=[spread(ZONE, {"app": "x"}, when="ScheduleAnyway")],
    )
    plan = run([p], pools=[pool(taints=[taint("soft", "PreferNoSchedule")])])
    reason = error_of(plan, "x")
    steps = [
        "dropped a required node affinity term",
        "dropped a preferred pod affinity term",
        "dropped a preferred pod anti-affinity term",
        "dropped a preferred node affinity term",
        "dropped ScheduleAnyway topology spread on topology.kubernetes.io/zone",
        "tolerated PreferNoSchedule taints",
    ]
    positions = [reason.index(s) for s in steps]
    assert positions == sorted(positions), reason
    assert "zone-y" in reason


# ----------------------------------------------------------------------------- determinism


def _mixed_pods() -> list[Any]:
    pods = []
    for i in range(60):
        kind = i % 6
        labels = {"app": f"a{i % 4}"}
        spec: dict[str, Any] = {}
        if kind == 1:
            spec["topologySpreadConstraints"] = [spread(ZONE, labels)]
        elif kind == 2:
            spec["topologySpreadConstraints"] = [spread(HOSTNAME, labels, skew=2)]
        elif kind == 3:
            spec["affinity"] = {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": labels}, "topologyKey": ZONE}
                    ]
                }
            }
        elif kind == 4:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 3,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": labels},
                                "topologyKey": HOSTNAME,
                            },
                        }
                    ]
                }
            }
        elif kind == 5:
            spec["nodeSelector"] = {CAPACITY_TYPE: "on-demand"}
        cpu = ("100m", "250m", "500m", "1", "1500m")[i % 5]
        pods.append(pod(f"p{i:02d}", cpu, ("128Mi", "1Gi", "3Gi")[i % 3], labels=labels, **spec))
    return pods


def _fingerprint(plan: Plan) -> list[Any]:
    return [
        [
            (
                nc.node_pool,
                nc.hostname,
                nc.instance_type.name,
                nc.offering,
                tuple(sorted(nc.labels.items())),
                nc.requirements,
                tuple(it.name for it in nc.instance_types),
                tuple(p.name for p in nc.pods),
                tuple(sorted(nc.requests.items())),
            )
            for nc in plan.new_node_claims
        ],
        [(e.pod.name, e.reason) for e in plan.errors],
        [(x.node_name, tuple(p.name for p in x.pods)) for x in plan.existing],
    ]


def test_solving_twice_gives_identical_plans():
    types: list[InstanceType] = fake_instance_types(40)

    def once() -> Plan:
        inp = SolveInput(
            pods=_mixed_pods(),
            pools=[
                pool("default"),
                pool("heavy", weight=5, requirements=[sel(CAPACITY_TYPE, "In", "on-demand")]),
            ],
            instance_types={"default": types, "heavy": types},
            options=SolveOptions(),
        )
        return solve(inp)

    first, second = once(), once()
    assert _fingerprint(first) == _fingerprint(second)
    assert first.placed_pods() + len(first.errors) == 60
    assert first.new_node_claims


def test_input_order_of_equal_pods_does_not_change_the_plan_shape():
    pods = [pod(f"p{i}", "1") for i in range(5)]
    a = run(pods)
    b = run(list(reversed(pods)))
    assert _fingerprint(a) == _fingerprint(b)
