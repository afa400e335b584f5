"""End to end through ``main``: the real solver, a tiny KWOK catalog, and the bundled demo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.cli.main import main
from tests.unit.cli.conftest import Writer, node, nodeclaim, nodepool, pod, workload

REPO = Path(__file__).resolve().parents[3]


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """The parsed ``-o json`` output (Any: the tests check its shape)."""
    code = main(["plan", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def claims_of(data: Any) -> list[Any]:
    claims = data["nodeClaims"]
    assert isinstance(claims, list)
    return claims


def test_json_contract_from_the_real_solver(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    docs = (
        nodepool(template_spec={"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}),
        workload(
            "Deployment",
            "web",
            replicas=3,
            template={
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
                },
            },
        ),
    )
    data = plan_json(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert list(data) == ["nodeClaims", "existingNodes", "unschedulable", "cost"]
    (nc,) = claims_of(data)
    assert list(nc) == [
        "nodePool",
        "instanceType",
        "instanceTypes",
        "capacityType",
        "zone",
        "price",
        "labels",
        "taints",
        "pods",
    ]
    assert nc["nodePool"] == "default"
    assert nc["instanceType"] == "c-2x-amd64-linux"  # the cheapest that fits 1.5 cpu
    assert isinstance(nc["instanceTypes"], list)
    assert nc["instanceType"] in nc["instanceTypes"]
    assert (nc["capacityType"], nc["price"]) == ("spot", 0.032)
    assert nc["zone"] in ("zone-a", "zone-b")
    labels = nc["labels"]
    assert isinstance(labels, dict)
    assert labels["karpenter.sh/nodepool"] == "default"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["node.kubernetes.io/instance-type"] == "c-2x-amd64-linux"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert labels["topology.kubernetes.io/zone"] == nc["zone"]
    assert nc["taints"] == [{"key": "dedicated", "value": "", "effect": "NoSchedule"}]
    assert nc["pods"] == ["default/web-0", "default/web-1", "default/web-2"]
    assert data["existingNodes"] == []
    assert data["unschedulable"] == []
    assert data["cost"] == {"hourly": 0.032}


def test_pending_pod_lands_on_existing_node_capacity(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    docs = (
        nodepool(),
        node("node-1", cpu="4"),
        pod("running", nodeName="node-1", cpu="1"),
        pod("fits", cpu="1"),
    )
    data = plan_json(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert data["existingNodes"] == [{"name": "node-1", "pods": ["default/fits"]}]
    assert data["nodeClaims"] == []
    assert data["cost"] == {"hourly": 0.0}


def test_bound_pods_use_up_existing_capacity(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    docs = (
        nodepool(),
        node("node-1", cpu="4"),
        pod("running", nodeName="node-1", cpu="1"),
        pod("too-big-for-the-rest", cpu="3500m"),  # 4 - 1 = 3 cpu are left on node-1
    )
    data = plan_json(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert data["existingNodes"] == []
    (nc,) = claims_of(data)
    assert nc["pods"] == ["default/too-big-for-the-rest"]
    assert nc["instanceType"] == "c-4x-arm64-linux"  # the pool allows any arch; cheapest fit


def test_daemonset_overhead_is_added_to_new_nodes(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    deployment = workload("Deployment", "web", replicas=3)  # 3 x 500m fits a 2-cpu type ...
    ds = workload(
        "DaemonSet",
        "agent",
        template={
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]},
        },
    )
    without = plan_json(
        capsys, "-f", write(nodepool(), deployment), "--instance-types", catalog_file
    )
    assert [c["instanceType"] for c in claims_of(without)] == ["c-2x-amd64-linux"]
    with_ds = plan_json(
        capsys,
        "-f",
        write(nodepool(), deployment, ds, name="ds.yaml"),
        "--instance-types",
        catalog_file,
    )
    # ... but not with a 1-cpu daemon on every node: 1.5 + 1 cpu > 1.9 allocatable.
    (nc,) = claims_of(with_ds)
    assert nc["instanceTypes"] == ["c-4x-arm64-linux", "c-8x-amd64-linux"]
    assert nc["pods"] == ["default/web-0", "default/web-1", "default/web-2"]


def test_unschedulable_pod_has_a_reason_and_exit_is_0(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    data = plan_json(
        capsys, "-f", write(nodepool(), pod("huge", cpu="100")), "--instance-types", catalog_file
    )
    assert data["nodeClaims"] == []
    unschedulable = data["unschedulable"]
    assert isinstance(unschedulable, list)
    assert [u["pod"] for u in unschedulable] == ["default/huge"]
    assert unschedulable[0]["reason"]


def test_table_prints_nodes_and_total_cost(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    path = write(nodepool(), workload("Deployment", "web", replicas=3), pod("huge", cpu="100"))
    assert main(["plan", "-f", path, "--instance-types", catalog_file]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "4 pending pods: 3 on new nodes, 0 on existing nodes, 1 unschedulable"
    (row,) = [line for line in lines if line.startswith("default ")]
    cells = row.split()
    assert cells[1] == "c-2x-amd64-linux"
    assert cells[2] in ("zone-a", "zone-b")
    assert cells[3:6] == ["spot", "0.0320", "3"]
    assert "default/huge" in out
    assert lines[-1] == "Total hourly cost: $0.0320"


def test_bundled_demo_plans_with_the_builtin_aws_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = plan_json(capsys, "-f", str(REPO / "examples" / "demo.yaml"))
    claims = claims_of(data)
    existing = data["existingNodes"]
    placed = [p for nc in claims for p in nc["pods"]] + [p for e in existing for p in e["pods"]]
    expected = {f"default/inflate-{i}" for i in range(10)}
    expected |= {f"shop/db-{i}" for i in range(3)} | {f"shop/storefront-{i}" for i in range(4)}
    assert sorted(placed) == sorted(expected)
    assert [u["pod"] for u in data["unschedulable"]] == ["shop/trainer"]
    assert [e["name"] for e in existing] == ["ip-192-168-12-34.ec2.internal"]
    # Storefront (arm64, tolerates the taint) goes to the graviton pool, the rest to default.
    for nc in claims:
        arm = any(p.startswith("shop/storefront-") for p in nc["pods"])
        assert nc["nodePool"] == ("graviton" if arm else "default")
        assert nc["labels"]["kubernetes.io/arch"] == ("arm64" if arm else "amd64")
        if not arm:
            assert nc["labels"]["team"] == "platform"  # the pool's template label
    # One db replica per zone (the existing node is in us-east-1a).
    db_zones = [nc["zone"] for nc in claims for p in nc["pods"] if p.startswith("shop/db-")]
    db_zones += ["us-east-1a" for e in existing for p in e["pods"] if p.startswith("shop/db-")]
    assert len(db_zones) == len(set(db_zones)) == 3
    assert data["cost"]["hourly"] == round(sum(nc["price"] for nc in claims), 6)


def test_pending_pod_lands_on_an_in_flight_nodeclaim(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    tolerant = pod("next", cpu="1", tolerations=[{"key": "team", "operator": "Exists"}])
    docs = (nodepool(), nodeclaim("default-flying"), tolerant)
    data = plan_json(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert data["existingNodes"] == [{"name": "default-flying", "pods": ["default/next"]}]
    assert data["nodeClaims"] == []


def test_namespace_selector_in_pod_anti_affinity(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    """An anti-affinity term selecting namespaces by label keeps the two pods apart."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {"tier": "db"}}}
        for n in ("red", "blue")
    ]
    term = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"tier": "db"}},
    }
    pods = []
    for ns in ("red", "blue"):
        doc = pod(
            "db",
            ns,
            affinity={
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            },
        )
        doc["metadata"]["labels"] = {"app": "db"}  # type: ignore[index]
        pods.append(doc)
    data = plan_json(
        capsys, "-f", write(nodepool(), *namespaces, *pods), "--instance-types", catalog_file
    )
    assert sorted(nc["pods"][0] for nc in claims_of(data)) == ["blue/db", "red/db"]
    assert all(len(nc["pods"]) == 1 for nc in claims_of(data))
