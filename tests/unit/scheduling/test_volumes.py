"""Volume topology: claims, volumes and classes -> requirement alternatives -> where pods go."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.model.core import Pod, SelectorRequirement
from karpenter_py.model.fields import ParseError
from karpenter_py.model.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObjects,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions, VolumeFacts
from karpenter_py.scheduling.plan import Plan
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.scheduling.volumes import pod_volume_facts, volume_inputs
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    PersistentVolumeClaimSink,
    PersistentVolumeSink,
    StorageClassSink,
)
from tests.unit.scheduling._helpers import (
    HOSTNAME,
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
    spread,
    standard_types,
)

# ----------------------------------------------------------------------------- builders


def in_(key: str, *values: str) -> SelectorRequirement:
    return SelectorRequirement(key, "In", values)


def with_claims(name: str, *claims: str, cpu: str = "100m", **kw: Any) -> Pod:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return pod(name, cpu, volumes=volumes, **kw)


def bound(name: str, volume: str, *, completed: bool = True, **kw: Any) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        "default", name, volume_name=volume, phase="Bound", bind_completed=completed, **kw
    )


def unbound(name: str, storage_class: str | None, **kw: Any) -> PersistentVolumeClaim:
    return PersistentVolumeClaim("default", name, storage_class_name=storage_class, **kw)


def zonal(name: str, *zones_per_term: Sequence[str], **kw: Any) -> PersistentVolume:
    return PersistentVolume(
        name, node_affinity=tuple((in_(ZONE, *zs),) for zs in zones_per_term), **kw
    )


def wffc(name: str, *zones_per_term: Sequence[str]) -> StorageClass:
    return StorageClass(
        name,
        provisioner="ebs.csi.aws.com",
        volume_binding_mode="WaitForFirstConsumer",
        allowed_topologies=tuple((in_(ZONE, *zs),) for zs in zones_per_term),
    )


def storage(
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
    classes: Sequence[StorageClass] = (),
) -> StorageObjects:
    return StorageObjects(
        claims={c.key: c for c in claims},
        volumes={v.name: v for v in volumes},
        classes={c.name: c for c in classes},
    )


def zones_of(facts: VolumeFacts) -> list[list[tuple[str, tuple[str, ...]]]]:
    return [[(r.key, r.values) for r in alt] for alt in facts.alternatives]


# ----------------------------------------------------------------------------- facts: the table

LOCAL_PIN = PersistentVolume(
    "local-1",
    node_affinity=((in_(HOSTNAME, "n1"),),),
    local=True,
)
LOCAL_PIN_ZONE = PersistentVolume(
    "local-2",
    node_affinity=((in_(HOSTNAME, "n1"), in_(ZONE, "zone-a")),),
    local=True,
)

FACTS_CASES = [
    pytest.param(pod("plain"), storage(), [], None, {}, id="no-volumes"),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv-b")], [zonal("pv-b", ["zone-b"])]),
        [[(ZONE, ("zone-b",))]],
        None,
        {},
        id="bound-zonal-pv",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv")], [zonal("pv", ["zone-a"], ["zone-c"])]),
        [[(ZONE, ("zone-a",))], [(ZONE, ("zone-c",))]],
        None,
        {},
        id="pv-or-terms-in-order",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv")], [PersistentVolume("pv")]),
        [],
        None,
        {},
        id="pv-without-affinity",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([unbound("data", "gp3")], classes=[wffc("gp3", ["zone-a", "zone-b"], ["zone-c"])]),
        [[(ZONE, ("zone-a", "zone-b"))], [(ZONE, ("zone-c",))]],
        None,
        {},
        id="wffc-allowed-topologies",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([unbound("data", "gp3")], classes=[wffc("gp3")]),
        [],
        None,
        {},
        id="wffc-without-topologies",
    ),
    pytest.param(
        with_claims("p", "a", "b"),
        storage(
            [bound("a", "pv-a"), bound("b", "pv-b")],
            [zonal("pv-a", ["zone-a"], ["zone-b"]), zonal("pv-b", ["zone-b"], ["zone-c"])],
        ),
        [[(ZONE, ("zone-b",))]],
        None,
        {},
        id="two-volumes-cross-product-pruned",
    ),
    pytest.param(
        with_claims("p", "a", "b"),
        storage(
            [bound("a", "pv-a"), bound("b", "pv-b")],
            [zonal("pv-a", ["zone-a"]), zonal("pv-b", ["zone-b"])],
        ),
        None,
        "their topologies do not intersect",
        {},
        id="two-volumes-disjoint",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "local-1")], [LOCAL_PIN]),
        [[(HOSTNAME, ("n1",))]],
        None,
        {},
        id="local-pv-pinned-to-its-node",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "local-1")], [LOCAL_PIN]),
        [],
        None,
        {"pin_local_volumes": False},
        id="local-pv-hostname-dropped-as-upstream",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "local-2")], [LOCAL_PIN_ZONE]),
        [[(ZONE, ("zone-a",))]],
        None,
        {"pin_local_volumes": False},
        id="local-pv-zone-kept-without-hostname",
    ),
    pytest.param(
        with_claims("p", "missing"),
        storage(),
        None,
        'persistentvolumeclaim "default/missing" not found',
        {},
        id="missing-pvc",
    ),
    pytest.param(
        with_claims("p", "data", ns="other"),
        storage([bound("data", "pv-b")], [zonal("pv-b", ["zone-b"])]),
        None,
        'persistentvolumeclaim "other/data" not found',
        {},
        id="pvc-in-another-namespace",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "gone")]),
        None,
        'bound to persistentvolume "gone", which was not found',
        {},
        id="missing-pv",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv", completed=False)], [zonal("pv", ["zone-b"])]),
        None,
        "not bound yet (no pv.kubernetes.io/bind-completed annotation)",
        {},
        id="bind-not-completed",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv", completed=False)], [zonal("pv", ["zone-b"])]),
        [[(ZONE, ("zone-b",))]],
        None,
        {"require_bind_completed": False},
        id="bind-not-completed-accepted-for-manifests",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv", deleting=True)], [zonal("pv", ["zone-b"])]),
        None,
        "is being deleted",
        {},
        id="pvc-deleting",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([bound("data", "pv")], [zonal("pv", ["zone-b"], deleting=True)]),
        None,
        'persistentvolume "pv", which is being deleted',
        {},
        id="pv-deleting",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([PersistentVolumeClaim("default", "data", volume_name="pv", phase="Lost")]),
        None,
        "is Lost",
        {},
        id="pvc-lost",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([unbound("data", None)]),
        None,
        "is unbound and names no storage class",
        {},
        id="unbound-without-class",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([unbound("data", "gp3")]),
        None,
        'uses storageclass "gp3", which was not found',
        {},
        id="missing-storage-class",
    ),
    pytest.param(
        with_claims("p", "data"),
        storage([unbound("data", "std")], classes=[StorageClass("std")]),
        None,
        'storageclass "std" binds Immediately',
        {},
        id="unbound-immediate",
    ),
]


@pytest.mark.parametrize(("the_pod", "objects", "alternatives", "error", "opts"), FACTS_CASES)
def test_volume_facts(
    the_pod: Pod,
    objects: StorageObjects,
    alternatives: list[list[tuple[str, tuple[str, ...]]]] | None,
    error: str | None,
    opts: dict[str, bool],
) -> None:
    facts = pod_volume_facts(the_pod, objects, **opts)
    if error is None:
        assert facts.error is None
        assert zones_of(facts) == alternatives
    else:
        assert facts.error is not None
        assert error in facts.error
        assert facts.alternatives == ()


def test_volume_inputs_skip_pods_without_claims_and_split_errors() -> None:
    objects = storage([bound("data", "pv")], [zonal("pv", ["zone-b"])])
    pods = [pod("plain"), with_claims("ok", "data"), with_claims("bad", "nope")]
    requirements, errors = volume_inputs(pods, objects)
    assert requirements == {"default/ok": ((in_(ZONE, "zone-b"),),)}
    assert list(errors) == ["default/bad"]


# ----------------------------------------------------------------------------- parsing


def test_parse_storage_objects() -> None:
    pvc = pvc_from_dict(
        {
            "metadata": {
                "name": "data",
                "namespace": "shop",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"volumeName": "pv-1", "storageClassName": ""},
            "status": {"phase": "Bound"},
        }
    )
    assert pvc == PersistentVolumeClaim(
        "shop",
        "data",
        volume_name="pv-1",
        storage_class_name="",
        phase="Bound",
        bind_completed=True,
    )
    pv = pv_from_dict(
        {
            "metadata": {"name": "pv-1"},
            "spec": {
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "failure-domain.beta.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": ["zone-a"],
                                    }
                                ]
                            },
                            {"matchFields": [{"key": "metadata.name", "operator": "In"}]},
                        ]
                    }
                },
            },
        }
    )
    assert pv.local
    assert pv.node_affinity == ((in_(ZONE, "zone-a"),), ())  # beta zone key normalised
    sc = storage_class_from_dict(
        {
            "metadata": {
                "name": "gp3",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a", "zone-b"]}]}
            ],
        }
    )
    assert sc.is_default
    assert sc.allowed_topologies == ((in_(ZONE, "zone-a", "zone-b"),),)
    assert storage_class_from_dict({"metadata": {"name": "std"}}).volume_binding_mode == (
        "Immediate"
    )


@pytest.mark.parametrize(
    ("parse", "raw", "path"),
    [
        (pvc_from_dict, {"metadata": {}}, "persistentVolumeClaim.metadata.name"),
        (pvc_from_dict, {"metadata": {"name": "x"}, "spec": {"volumeName": 3}}, ".spec.volumeName"),
        (
            pv_from_dict,
            {
                "metadata": {"name": "x"},
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": ZONE, "operator": "Near"}]}
                            ]
                        }
                    }
                },
            },
            "nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (
            storage_class_from_dict,
            {"metadata": {"name": "x"}, "volumeBindingMode": "Later"},
            "storageClass.volumeBindingMode",
        ),
        (
            storage_class_from_dict,
            {"metadata": {"name": "x"}, "allowedTopologies": [{"matchLabelExpressions": [{}]}]},
            "allowedTopologies[0].matchLabelExpressions[0].key",
        ),
    ],
)
def test_parse_errors_name_the_field(parse: Any, raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ParseError) as err:
        parse(raw)
    assert err.value.path.endswith(path)


# ----------------------------------------------------------------------------- the solver


def solve_with(
    pods: Sequence[Pod],
    objects: StorageObjects,
    *,
    types: Sequence[Any] | None = None,
    existing_nodes: Sequence[Any] = (),
    pools: Sequence[Any] | None = None,
) -> Plan:
    requirements, errors = volume_inputs(pods, objects)
    pools = list(pools) if pools is not None else [pool()]
    catalog = list(types) if types is not None else standard_types()
    return solve(
        SolveInput(
            pods=list(pods),
            pools=pools,
            instance_types={p.name: catalog for p in pools},
            existing=list(existing_nodes),
            volume_requirements=requirements,
            volume_errors=errors,
        )
    )


def test_pod_with_zonal_volume_gets_a_nodeclaim_in_that_zone() -> None:
    plan = solve_with(
        [with_claims("db", "data")],
        storage([bound("data", "pv-b")], [zonal("pv-b", ["zone-b"])]),
    )
    nc = claim_of(plan, "db")
    assert req_values(nc, ZONE) == ("zone-b",)
    assert nc.offering.zone == "zone-b"
    assert nc.labels[ZONE] == "zone-b"


def test_alternatives_are_tried_in_order_and_skip_zones_no_offering_serves() -> None:
    # The first term's zone has no offering in this catalog: the second one is used.
    types = [itype("small", 2, 4, zones=("zone-b", "zone-c"))]
    plan = solve_with(
        [with_claims("db", "data")],
        storage([bound("data", "pv")], [zonal("pv", ["zone-a"], ["zone-c"])]),
        types=types,
    )
    assert req_values(claim_of(plan, "db"), ZONE) == ("zone-c",)


def test_first_alternative_wins_when_both_fit() -> None:
    plan = solve_with(
        [with_claims("db", "data")],
        storage([bound("data", "pv")], [zonal("pv", ["zone-c"], ["zone-a"])]),
    )
    assert req_values(claim_of(plan, "db"), ZONE) == ("zone-c",)


def test_unbound_claim_follows_storage_class_allowed_topologies() -> None:
    plan = solve_with(
        [with_claims("db", "data")],
        storage([unbound("data", "gp3")], classes=[wffc("gp3", ["zone-a"])]),
    )
    assert req_values(claim_of(plan, "db"), ZONE) == ("zone-a",)


def test_pool_that_cannot_reach_the_zone_makes_the_pod_unschedulable() -> None:
    plan = solve_with(
        [with_claims("db", "data")],
        storage([bound("data", "pv-c")], [zonal("pv-c", ["zone-c"])]),
        pools=[pool(requirements=[in_(ZONE, "zone-a", "zone-b")])],
    )
    assert "incompatible volume requirements" in error_of(plan, "db")


def test_existing_nodes_must_carry_the_volume_topology() -> None:
    node_a = existing(make_node("n-a", labels={ZONE: "zone-a"}))
    node_none = existing(make_node("n-nolabel"))
    objects = storage(
        [bound("in-a", "pv-a"), bound("in-b", "pv-b")],
        [zonal("pv-a", ["zone-a"]), zonal("pv-b", ["zone-b"])],
    )
    plan = solve_with(
        [with_claims("pa", "in-a"), with_claims("pb", "in-b")],
        objects,
        existing_nodes=[node_none, node_a],
    )
    where = by_pod(plan)
    assert where["pa"] == "node/n-a"
    assert where["pb"].startswith("claim-")  # neither node is in zone-b (one has no zone at all)
    assert req_values(claim_of(plan, "pb"), ZONE) == ("zone-b",)


def test_local_volume_pins_the_pod_to_its_node_or_nowhere() -> None:
    objects = storage([bound("data", "local-1")], [LOCAL_PIN])
    roomy = existing(make_node("n1", cpu="4"))
    other = existing(make_node("n2", cpu="4"))
    plan = solve_with([with_claims("db", "data")], objects, existing_nodes=[other, roomy])
    assert by_pod(plan) == {"db": "node/n1"}
    assert not plan.new_node_claims

    full = existing(make_node("n1", cpu="100m"))
    plan = solve_with([with_claims("db", "data", cpu="1")], objects, existing_nodes=[other, full])
    assert not plan.new_node_claims
    assert "incompatible volume requirements" in error_of(plan, "db")


def test_missing_claim_is_a_clear_pod_error_and_others_are_unaffected() -> None:
    plan = solve_with([with_claims("db", "missing"), pod("web")], storage())
    assert error_of(plan, "db") == 'persistentvolumeclaim "default/missing" not found'
    assert by_pod(plan) == {"web": "claim-0"}


def test_pods_without_volumes_plan_exactly_as_before() -> None:
    pods = [
        pod(
            f"w{i}",
            "700m",
            labels={"app": "w"},
            topologySpreadConstraints=[spread(ZONE, {"app": "w"})],
        )
        for i in range(6)
    ]
    before = solve_with(pods, storage())
    objects = storage([bound("data", "pv-b")], [zonal("pv-b", ["zone-b"])])
    after = solve_with([*pods, with_claims("db", "data", cpu="50m")], objects)
    assert {k: v for k, v in by_pod(after).items() if k != "db"} == by_pod(before)
    assert [req_values(nc, ZONE) for nc in before.new_node_claims] == [
        req_values(nc, ZONE) for nc in after.new_node_claims
    ]


def test_a_refusal_for_a_volume_is_not_remembered_for_a_pod_without_one() -> None:
    # Same shape; a-vol and b-vol are placed first (older), c (no volume) last.
    objects = storage(
        [bound("in-b", "pv-b"), bound("in-a", "pv-a")],
        [zonal("pv-b", ["zone-b"]), zonal("pv-a", ["zone-a"])],
    )
    pods = [
        with_claims("first", "in-b", cpu="500m", created="2024-01-01T00:00:00Z"),
        with_claims("second", "in-a", cpu="500m", created="2024-01-01T00:00:01Z"),
        pod("third", "500m", created="2024-01-01T00:00:02Z"),
    ]
    where = by_pod(solve_with(pods, objects))
    assert where["first"] != where["second"]
    assert where["third"] == where["first"]  # the zone-b claim still takes a pod that fits it


def test_topology_spread_counts_the_pod_by_its_own_requirements() -> None:
    # Volumes narrow the node, not the pod: the spread is still over every zone, so a second
    # zone-a pod would skew it (maxSkew 1) while a pod without a volume evens it out.
    objects = storage(
        [bound("d1", "pv-1"), bound("d2", "pv-2")],
        [
            zonal("pv-1", ["zone-a"]),
            zonal("pv-2", ["zone-a"]),
        ],
    )
    tsc: dict[str, Any] = {"topologySpreadConstraints": [spread(ZONE, {"app": "db"})]}
    pods = [
        with_claims("db-1", "d1", labels={"app": "db"}, created="2024-01-01T00:00:00Z", **tsc),
        with_claims("db-2", "d2", labels={"app": "db"}, created="2024-01-01T00:00:01Z", **tsc),
        pod("db-3", labels={"app": "db"}, created="2024-01-01T00:00:02Z", **tsc),
    ]
    plan = solve_with(pods, objects)
    assert req_values(claim_of(plan, "db-1"), ZONE) == ("zone-a",)
    assert "topology spread" in error_of(plan, "db-2")
    assert req_values(claim_of(plan, "db-3"), ZONE) != ("zone-a",)


# ----------------------------------------------------------------------------- from cluster state


def test_cluster_state_feeds_volume_facts_into_the_solve_input() -> None:
    cluster = Cluster()
    PersistentVolumeClaimSink(cluster).listed(
        [
            {
                "metadata": {
                    "name": "data",
                    "namespace": "default",
                    "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                },
                "spec": {"volumeName": "pv-b", "storageClassName": ""},
                "status": {"phase": "Bound"},
            },
            {"metadata": {"name": "broken", "namespace": "default"}, "spec": {"volumeName": 1}},
        ]
    )
    PersistentVolumeSink(cluster).upsert(
        {
            "metadata": {"name": "pv-b"},
            "spec": {
                "hostPath": {"path": "/tmp/x"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": ZONE, "operator": "In", "values": ["zone-b"]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    StorageClassSink(cluster).upsert({"metadata": {"name": "gp3"}, "provisioner": "x"})
    assert "persistentvolumeclaims/default/broken" in cluster.invalid
    for p in (with_claims("db", "data"), with_claims("other", "broken")):
        cluster.upsert_pod(replace(p, unschedulable=True))
    snapshot = cluster.snapshot(datetime(2024, 1, 1, tzinfo=UTC))
    assert set(snapshot.storage.classes) == {"gp3"}
    inp = solve_input(snapshot, instance_types={}, options=SolveOptions())
    assert inp.volume_requirements == {"default/db": ((in_(ZONE, "zone-b"),),)}
    assert inp.volume_errors == {
        "default/other": 'persistentvolumeclaim "default/broken" not found'
    }
    PersistentVolumeSink(cluster).delete({"metadata": {"name": "pv-b"}})
    inp = solve_input(
        cluster.snapshot(datetime(2024, 1, 1, tzinfo=UTC)),
        instance_types={},
        options=SolveOptions(),
    )
    assert "which was not found" in inp.volume_errors["default/db"]


def test_ebs_csi_zone_key_on_a_volume_means_the_zone() -> None:
    from karpenter_py.model.storage import pv_from_dict

    pv = pv_from_dict(
        {
            "metadata": {"name": "pv-ebs"},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.ebs.csi.aws.com/zone",
                                        "operator": "In",
                                        "values": ["zone-c"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
        }
    )
    plan = solve_with([with_claims("db", "data")], storage([bound("data", "pv-ebs")], [pv]))
    assert req_values(claim_of(plan, "db"), ZONE) == ("zone-c",)


def test_generic_ephemeral_volumes_count_as_the_claims_kubernetes_creates_for_them() -> None:
    from karpenter_py.model.core import pod_from_dict

    pod = pod_from_dict(
        {
            "metadata": {"name": "web-0", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "cache", "emptyDir": {}},
                ],
            },
        }
    )
    assert pod.pvc_names == ("data", "web-0-scratch")
    plan = solve_with(
        [pod],
        storage(
            [bound("data", "pv-c"), bound("web-0-scratch", "pv-c2")],
            [zonal("pv-c", ["zone-c"]), zonal("pv-c2", ["zone-c"])],
        ),
    )
    assert req_values(claim_of(plan, "web-0"), ZONE) == ("zone-c",)
