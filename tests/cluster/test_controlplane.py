"""The local control plane is a real Kubernetes: version, scheduling onto kwok nodes, CRD schema
and CEL validation, PDB-guarded eviction, and 410 Gone on an expired watch.

All tests talk HTTPS to the apiserver started by the session-scoped ``cluster`` fixture
(tests/clusterfixture.py)."""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.clusterfixture import ClusterHandle, KubeAPI, KubeAPIError, wait_for

pytestmark = pytest.mark.cluster

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "manifests" / "crds"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok plays the kubelet


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def condition(obj: dict[str, Any], ctype: str) -> str | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == ctype:
            return str(c.get("status"))
    return None


def get_when(api: KubeAPI, path: str, pred: Callable[[Any], bool]) -> Any:
    """GET path; the object if pred(object) holds, else None (for wait_for)."""
    obj = api.get(path)
    return obj if pred(obj) else None


def pod_manifest(name: str, labels: dict[str, str], node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": KWOK_ANNOTATION, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def api(cluster: ClusterHandle) -> KubeAPI:
    return cluster.api


@pytest.fixture
def namespace(api: KubeAPI) -> Iterator[str]:
    name = unique("karpy-test")
    api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    api.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="module")
def kwok_node(api: KubeAPI) -> Iterator[str]:
    """A fake Node managed by kwok (annotation kwok.x-k8s.io/node=fake), tainted so that only
    pods that tolerate it land there."""
    name = unique("kwok-node")
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    api.create(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_ANNOTATION: "fake"},
                "labels": {
                    KWOK_ANNOTATION: "fake",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"taints": [{"key": KWOK_ANNOTATION, "value": "fake", "effect": "NoSchedule"}]},
            "status": {"allocatable": resources, "capacity": resources},
        },
    )
    yield name
    api.request("DELETE", f"/api/v1/nodes/{name}")


# --------------------------------------------------------------------------- 1. version


def test_version_reports_the_real_release(api: KubeAPI) -> None:
    v = api.get("/version")
    assert v["gitVersion"].startswith("v1.37."), v
    assert (v["major"], v["minor"]) == ("1", "37"), v
    assert v["gitTreeState"] == "clean", v


# --------------------------------------------------------------------------- 2. nodes + scheduler


def test_kwok_node_ready_and_deployment_pods_scheduled_and_running(
    api: KubeAPI, kwok_node: str, namespace: str
) -> None:
    node = wait_for(
        lambda: get_when(
            api, f"/api/v1/nodes/{kwok_node}", lambda n: condition(n, "Ready") == "True"
        ),
        timeout=60,
        what=f"node {kwok_node} Ready",
    )
    assert node["status"]["allocatable"]["cpu"] == "32"  # kwok keeps the capacity we gave it
    # kwok renews the node's Lease like a kubelet does; the node lifecycle controller reads it.
    lease = wait_for(
        lambda: api.get(
            f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{kwok_node}"
        ),
        timeout=30,
        what="node lease",
    )
    assert lease["spec"]["holderIdentity"]  # the kwok controller's id
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["spec"]["renewTime"]

    labels = {"app": "web"}
    template = pod_manifest("unused", labels, kwok_node)
    del template["metadata"]["name"]
    api.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": labels},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        },
    )

    def running_pods() -> list[dict[str, Any]] | None:
        pods = api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=web")["items"]
        ok = [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return ok if len(ok) == 3 else None

    pods = wait_for(running_pods, timeout=90, what="3 Running pods of deployment web")
    for p in pods:
        assert p["spec"]["nodeName"] == kwok_node  # bound by kube-scheduler
        assert condition(p, "PodScheduled") == "True"
        assert condition(p, "Ready") == "True"
        assert p["status"].get("podIP")  # from kwok's cidr
    dep = wait_for(
        lambda: get_when(
            api,
            f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
            lambda d: d.get("status", {}).get("readyReplicas") == 3,
        ),
        timeout=60,
        what="deployment readyReplicas=3 (kube-controller-manager)",
    )
    assert dep["status"]["availableReplicas"] == 3
    events = api.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    assert any(e.get("reason") == "Scheduled" for e in events), [e.get("reason") for e in events]


# --------------------------------------------------------------------------- 3. CRDs


def load_crds() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(CRD_DIR.glob("*.yaml")) + sorted(CRD_DIR.glob("*.yml")):
        docs.extend(
            d
            for d in yaml.safe_load_all(path.read_text())
            if d and d.get("kind") == "CustomResourceDefinition"
        )
    return docs


def storage_version(crd: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v.get("storage"))


def schema_at(crd: dict[str, Any], *path: str) -> dict[str, Any]:
    """Follow properties/items through the storage version's openAPIV3Schema."""
    node: dict[str, Any] = storage_version(crd)["schema"]["openAPIV3Schema"]
    for key in path:
        if key == "[]":
            node = node.get("items", {})
        else:
            node = node.get("properties", {}).get(key, {})
    return node


def rule_messages(node: dict[str, Any], needle: str) -> list[str]:
    return [
        r.get("message", "")
        for r in node.get("x-kubernetes-validations", [])
        if needle in r.get("rule", "")
    ]


def crd_by_kind(crds: list[dict[str, Any]], group: str, kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in crds if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == kind),
        None,
    )


@pytest.fixture(scope="module")
def installed_crds(api: KubeAPI) -> list[dict[str, Any]]:
    crds = load_crds()
    assert crds, f"no CustomResourceDefinition found in {CRD_DIR}/*.yaml"
    for crd in crds:
        api.apply(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}",
            crd,
        )
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_for(
            functools.partial(
                get_when,
                api,
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                lambda c: condition(c, "Established") == condition(c, "NamesAccepted") == "True",
            ),
            timeout=60,
            what=f"CRD {name} Established",
        )
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                wait_for(
                    functools.partial(api.get, f"/apis/{group}/{v['name']}/{plural}"),
                    timeout=30,
                    what=f"{plural}.{group}/{v['name']} served",
                )
    return crds


def test_crds_install_and_become_established(installed_crds: list[dict[str, Any]]) -> None:
    names = {c["metadata"]["name"] for c in installed_crds}
    assert "nodepools.karpenter.sh" in names, names
    assert "nodeclaims.karpenter.sh" in names, names


def _nodepool(crds: list[dict[str, Any]], name: str) -> tuple[str, dict[str, Any]]:
    np_crd = crd_by_kind(crds, "karpenter.sh", "NodePool")
    assert np_crd is not None, "no NodePool CRD in manifests/crds"
    version = storage_version(np_crd)["name"]
    ref_schema = schema_at(np_crd, "spec", "template", "spec", "nodeClassRef")
    kwok_class = crd_by_kind(crds, "karpenter.kwok.sh", "KWOKNodeClass")
    group = kwok_class["spec"]["group"] if kwok_class else "karpenter.kwok.sh"
    kind = kwok_class["spec"]["names"]["kind"] if kwok_class else "KWOKNodeClass"
    candidates = {
        "group": group,
        "kind": kind,
        "name": "default",
        "apiVersion": f"{group}/{storage_version(kwok_class)['name'] if kwok_class else 'v1alpha1'}",
    }
    props = ref_schema.get("properties", {})
    ref = (
        {k: v for k, v in candidates.items() if k in props}
        if props
        else {"group": group, "kind": kind, "name": "default"}
    )
    obj = {
        "apiVersion": f"karpenter.sh/{version}",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "karpy"}},
                "spec": {
                    "nodeClassRef": ref,
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ],
                },
            },
        },
    }
    return f"/apis/karpenter.sh/{version}/nodepools", obj


def _expect_rejected(api: KubeAPI, path: str, obj: dict[str, Any]) -> str:
    status, body = api.request("POST", path, obj)
    if status < 300:  # accepted by mistake: clean up, then fail
        api.request("DELETE", f"{path}/{obj['metadata']['name']}")
    assert status == 422, f"expected 422 Invalid, got {status}: {body}"
    assert isinstance(body, dict), body
    assert body.get("reason") == "Invalid", body
    return str(body.get("message", ""))


def test_valid_nodepool_is_accepted(api: KubeAPI, installed_crds: list[dict[str, Any]]) -> None:
    path, obj = _nodepool(installed_crds, unique("valid"))
    created = api.create(path, obj)
    try:
        assert created["metadata"]["uid"]
        got = api.get(f"{path}/{obj['metadata']['name']}")
        assert got["spec"]["template"]["spec"]["requirements"][0]["values"] == ["amd64"]
    finally:
        api.request("DELETE", f"{path}/{obj['metadata']['name']}")


def test_nodepool_weight_above_maximum_is_rejected_by_schema(
    api: KubeAPI, installed_crds: list[dict[str, Any]]
) -> None:
    np_crd = crd_by_kind(installed_crds, "karpenter.sh", "NodePool")
    assert np_crd is not None
    assert schema_at(np_crd, "spec", "weight").get("maximum") == 100, (
        "NodePool spec.weight must have maximum: 100"
    )
    path, obj = _nodepool(installed_crds, unique("weight"))
    obj["spec"]["weight"] = 101
    message = _expect_rejected(api, path, obj)
    assert "spec.weight" in message, message
    assert "100" in message, message


def test_nodepool_in_requirement_without_values_is_rejected(
    api: KubeAPI, installed_crds: list[dict[str, Any]]
) -> None:
    np_crd = crd_by_kind(installed_crds, "karpenter.sh", "NodePool")
    assert np_crd is not None
    path, obj = _nodepool(installed_crds, unique("novalues"))
    obj["spec"]["template"]["spec"]["requirements"] = [
        {"key": "kubernetes.io/arch", "operator": "In"}
    ]
    message = _expect_rejected(api, path, obj)
    # The CRD's own rule(s) about 'In' requirements, wherever they sit (array or item level).
    reqs = schema_at(np_crd, "spec", "template", "spec", "requirements")
    expected = rule_messages(reqs, "'In'") + rule_messages(reqs.get("items", {}), "'In'")
    assert expected, "NodePool requirements carry no CEL rule about operator 'In'"
    assert any(m in message for m in expected), (message, expected)


def test_nodepool_restricted_label_is_rejected_by_cel_rule(
    api: KubeAPI, installed_crds: list[dict[str, Any]]
) -> None:
    np_crd = crd_by_kind(installed_crds, "karpenter.sh", "NodePool")
    assert np_crd is not None
    labels_schema = schema_at(np_crd, "spec", "template", "metadata", "labels")
    expected = rule_messages(labels_schema, "karpenter.sh/nodepool")
    assert expected, (
        "spec.template.metadata.labels has no CEL rule restricting karpenter.sh/nodepool"
    )
    path, obj = _nodepool(installed_crds, unique("label"))
    obj["spec"]["template"]["metadata"]["labels"] = {"karpenter.sh/nodepool": "sneaky"}
    message = _expect_rejected(api, path, obj)
    assert any(m and m in message for m in expected), (message, expected)


# --------------------------------------------------------------------------- 4. eviction + PDB


def test_eviction_respects_pod_disruption_budget(
    api: KubeAPI, kwok_node: str, namespace: str
) -> None:
    labels = {"app": "guarded"}
    pods = ["guarded-0", "guarded-1"]
    for p in pods:
        api.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest(p, labels, kwok_node))
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/guard"
    api.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}},
        },
    )

    def pdb_settled(allowed: int) -> dict[str, Any] | None:
        pdb = api.get(pdb_path)
        st = pdb.get("status", {})
        fresh = st.get("observedGeneration") == pdb["metadata"]["generation"]
        return (
            pdb
            if fresh and st.get("currentHealthy") == 2 and st.get("disruptionsAllowed") == allowed
            else None
        )

    wait_for(
        lambda: all(
            condition(api.get(f"/api/v1/namespaces/{namespace}/pods/{p}"), "Ready") == "True"
            for p in pods
        ),
        timeout=60,
        what="guarded pods Ready",
    )
    wait_for(
        lambda: pdb_settled(0),
        timeout=60,
        what="PDB status from the disruption controller (allowed=0)",
    )

    def evict(pod: str) -> tuple[int, Any]:
        return api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod, "namespace": namespace},
            },
        )

    status, body = evict("guarded-0")
    assert status == 429, body
    assert "disruption budget" in body.get("message", ""), body

    api.merge_patch(pdb_path, {"spec": {"minAvailable": 1}})
    wait_for(lambda: pdb_settled(1), timeout=60, what="PDB status (allowed=1)")
    status, body = evict("guarded-0")
    assert status == 201, body
    # kwok's pod-delete stage finishes the graceful deletion the way a kubelet would.
    wait_for(
        lambda: api.request("GET", f"/api/v1/namespaces/{namespace}/pods/guarded-0")[0] == 404,
        timeout=60,
        what="evicted pod deleted",
    )
    # The budget is spent: the last pod is protected again.
    status, body = evict("guarded-1")
    assert status == 429, body


# --------------------------------------------------------------------------- 5. 410 Gone


def first_watch_answer(api: KubeAPI, path: str, rv: str) -> tuple[int, Any]:
    """(HTTP-ish code, body) of a watch: a non-200 answer, or an in-stream ERROR event's Status
    (the apiserver answers 200 and then sends the 410 as an ERROR event), or 200 + first event."""
    try:
        with contextlib.closing(api.watch(path, resource_version=rv, timeout_seconds=10)) as w:
            ev = next(w)
    except KubeAPIError as e:
        return e.status, e.body
    if ev["type"] == "ERROR":
        return int(ev["object"]["code"]), ev["object"]
    return 200, ev


def test_watch_from_compacted_resource_version_gets_410_gone(
    cluster: ClusterHandle, namespace: str
) -> None:
    """ConfigMaps are served without the watch cache (--watch-cache-sizes=configmaps#0), so a
    watch resumed below etcd's compaction revision is answered by etcd's ErrCompacted -> 410."""
    if cluster.etcd_url is None:
        pytest.skip(
            "KARPY_KUBECONFIG cluster without loopback etcd: cannot compact (expected 410 path untested)"
        )
    api = cluster.api
    cm_path = f"/api/v1/namespaces/{namespace}/configmaps"
    api.create(
        cm_path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "0"}},
    )
    old_rv = api.get(cm_path)["metadata"]["resourceVersion"]
    for i in range(1, 4):
        api.merge_patch(f"{cm_path}/c", {"data": {"n": str(i)}})
    compacted = cluster.compact_etcd()
    assert compacted > int(old_rv)

    code, status = first_watch_answer(api, cm_path, old_rv)
    assert code == 410, status
    assert status.get("reason") in ("Expired", "Gone"), status

    # The informer's way out: relist, then watch from the fresh resourceVersion.
    fresh = api.get(cm_path)
    assert [c["data"]["n"] for c in fresh["items"] if c["metadata"]["name"] == "c"] == ["3"]
    api.create(cm_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}})
    with contextlib.closing(
        api.watch(
            cm_path, resource_version=fresh["metadata"]["resourceVersion"], timeout_seconds=10
        )
    ) as events:
        ev = next(events)
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "d"), ev


def test_local_cluster_layout(cluster: ClusterHandle) -> None:
    if cluster.local is None:
        pytest.skip("KARPY_KUBECONFIG cluster: not started by this session")
    assert cluster.kubeconfig_path.is_file()
    assert cluster.server.startswith("https://127.0.0.1:")
    text = cluster.kubeconfig_path.read_text()
    assert cluster.server in text
    assert "certificate-authority-data" in text
    assert (os.stat(cluster.kubeconfig_path).st_mode & 0o077) == 0
    assert not cluster.local.dead_components()
    assert {p.stem for p in cluster.local.logs_dir.glob("*.log")} >= {
        "etcd",
        "kube-apiserver",
        "kube-scheduler",
        "kube-controller-manager",
        "kwok",
    }
