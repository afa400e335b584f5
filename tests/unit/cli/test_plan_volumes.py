"""``karpenter-py plan`` with PersistentVolumeClaims, PersistentVolumes and StorageClasses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpenter_py.cli.main import main
from karpenter_py.model.core import SelectorRequirement
from tests.unit.cli.conftest import Captured, Writer, container, nodepool, pod, workload

ZONE = "topology.kubernetes.io/zone"


def claim(name: str, *, volume: str = "", storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def volume(name: str, *zone_terms: list[str], local: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if local:
        spec["local"] = {"path": "/mnt/disks/1"}
    else:
        spec["csi"] = {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"}
    if zone_terms:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}
                    for zones in zone_terms
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def storage_class(
    name: str, *zone_terms: list[str], mode: str = "WaitForFirstConsumer", default: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": mode,
    }
    if zone_terms:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": zones}]} for zones in zone_terms
        ]
    return body


def mounting(name: str, *claims: str) -> dict[str, Any]:
    return pod(
        name,
        volumes=[
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    )


def statefulset(name: str, replicas: int, *templates: tuple[str, str | None]) -> dict[str, Any]:
    body: dict[str, Any] = workload("StatefulSet", name, replicas=replicas)
    vcts = []
    for tname, sc in templates:
        tspec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"]}
        if sc is not None:
            tspec["storageClassName"] = sc
        vcts.append({"metadata": {"name": tname}, "spec": tspec})
    body["spec"]["volumeClaimTemplates"] = vcts
    return body


def plan(capsys: pytest.CaptureFixture[str], path: str, catalog: str) -> tuple[Any, str]:
    code = main(["plan", "-f", path, "--instance-types", catalog, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def zones_by_pod(data: Any) -> dict[str, str]:
    return {p: nc["zone"] for nc in data["nodeClaims"] for p in nc["pods"]}


def reasons(data: Any) -> dict[str, str]:
    return {u["pod"]: u["reason"] for u in data["unschedulable"]}


@pytest.mark.parametrize(
    ("docs", "zones", "unschedulable"),
    [
        pytest.param(
            [
                claim("data", volume="pv-b", storage_class=""),
                volume("pv-b", ["zone-b"]),
                mounting("db", "data"),
            ],
            {"default/db": "zone-b"},
            {},
            id="bound-to-zonal-pv",
        ),
        pytest.param(
            [
                claim("data", volume="pv", storage_class=""),
                volume("pv", ["zone-b"], ["zone-a"]),
                mounting("db", "data"),
            ],
            {"default/db": "zone-b"},
            {},
            id="pv-or-terms-first-wins",
        ),
        pytest.param(
            [
                claim("data", storage_class="gp3"),
                storage_class("gp3", ["zone-b"]),
                mounting("db", "data"),
            ],
            {"default/db": "zone-b"},
            {},
            id="wffc-allowed-topologies",
        ),
        pytest.param(
            [mounting("db", "missing"), pod("web")],
            {"default/web": "zone-a"},
            {"default/db": 'persistentvolumeclaim "default/missing" not found'},
            id="missing-claim",
        ),
        pytest.param(
            [
                claim("data", storage_class="std"),
                storage_class("std", mode="Immediate"),
                mounting("db", "data"),
            ],
            {},
            {
                "default/db": 'persistentvolumeclaim "default/data" is unbound and storageclass "std" binds Immediately: it must be bound before the pod can be scheduled'
            },
            id="unbound-immediate",
        ),
        pytest.param(
            [
                claim("data", volume="local-pv", storage_class=""),
                volume("local-pv", ["zone-a"], local=True),
                mounting("db", "data"),
            ],
            {"default/db": "zone-a"},
            {},
            id="local-pv-zone",
        ),
    ],
)
def test_volume_topology_in_plan(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    docs: list[dict[str, Any]],
    zones: dict[str, str],
    unschedulable: dict[str, str],
) -> None:
    data, _ = plan(capsys, write(nodepool(), *docs), catalog_file)
    assert zones_by_pod(data) == zones
    assert reasons(data) == unschedulable


def test_facts_reach_the_solver(write: Writer, catalog_file: str, captured: Captured) -> None:
    docs = [
        nodepool(),
        claim("data", volume="pv-b", storage_class=""),
        volume("pv-b", ["zone-b"]),
        mounting("db", "data"),
        mounting("lost", "nope"),
        pod("plain"),
    ]
    assert main(["plan", "-f", write(*docs), "--instance-types", catalog_file]) == 0
    inp = captured.input
    assert inp.volume_requirements == {
        "default/db": ((SelectorRequirement(ZONE, "In", ("zone-b",)),),)
    }
    assert list(inp.volume_errors) == ["default/lost"]


def test_statefulset_claim_templates(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    # db-0's claim exists (bound to a zone-b volume); db-1's would be created from the template
    # with the default class, which only provisions in zone-a.
    docs = [
        nodepool(),
        claim("data-db-0", volume="pv-0", storage_class=""),
        volume("pv-0", ["zone-b"]),
        storage_class("gp3", ["zone-a"], default=True),
        statefulset("db", 2, ("data", None)),
    ]
    data, err = plan(capsys, write(*docs), catalog_file)
    assert zones_by_pod(data) == {"default/db-0": "zone-b", "default/db-1": "zone-a"}
    assert err == ""


def test_statefulset_claim_templates_without_their_class_are_not_simulated(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    data, err = plan(capsys, write(nodepool(), statefulset("db", 2, ("data", "gp3"))), catalog_file)
    assert sorted(zones_by_pod(data)) == ["default/db-0", "default/db-1"]
    assert data["unschedulable"] == []
    assert "volumeClaimTemplates not simulated for data-db-0, data-db-1" in err


@pytest.mark.parametrize(
    ("docs", "message"),
    [
        pytest.param(
            [claim("data"), claim("data")],
            "(PersistentVolumeClaim data): PersistentVolumeClaim default/data is also defined by",
            id="duplicate-claim",
        ),
        pytest.param(
            [volume("pv"), volume("pv")],
            "PersistentVolume pv is also defined by",
            id="duplicate-volume",
        ),
        pytest.param(
            [storage_class("gp3"), storage_class("gp3")],
            "StorageClass gp3 is also defined by",
            id="duplicate-class",
        ),
        pytest.param(
            [storage_class("gp3", mode="Sometimes")],
            "document 2 (StorageClass gp3): volumeBindingMode: must be one of",
            id="bad-binding-mode",
        ),
        pytest.param(
            [{**claim("data"), "apiVersion": "v2"}],
            "PersistentVolumeClaim is served as v1, not 'v2'",
            id="wrong-api-version",
        ),
        pytest.param(
            [{**storage_class("gp3"), "apiVersion": "storage.k8s.io/v1beta1"}],
            "StorageClass is served as storage.k8s.io/v1",
            id="old-storage-api",
        ),
        pytest.param(
            [
                {
                    **statefulset("db", 1),
                    "spec": {
                        **statefulset("db", 1)["spec"],
                        "volumeClaimTemplates": [{"spec": {}}],
                    },
                }
            ],
            "spec.volumeClaimTemplates[0].metadata.name: name is required",
            id="claim-template-without-name",
        ),
    ],
)
def test_storage_input_errors(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    docs: list[dict[str, Any]],
    message: str,
) -> None:
    code = main(["plan", "-f", write(nodepool(), *docs), "--instance-types", catalog_file])
    _, err = capsys.readouterr()
    assert code == 2
    assert message in err


def test_pods_without_volumes_are_planned_as_before(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    web: dict[str, Any] = workload("Deployment", "web", replicas=3)
    web["spec"]["template"]["spec"]["containers"] = [container("1500m")]
    before, _ = plan(capsys, write(nodepool(), web, name="a.yaml"), catalog_file)
    extra = [
        claim("data", volume="pv-b", storage_class=""),
        volume("pv-b", ["zone-b"]),
        storage_class("gp3"),
    ]
    after, _ = plan(capsys, write(nodepool(), web, *extra, name="b.yaml"), catalog_file)
    assert after == before
