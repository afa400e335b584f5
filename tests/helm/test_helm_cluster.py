"""helm install / upgrade / uninstall of charts/karpenter-py into the local control plane.

Each test uses its own release and namespace (random suffix), so it shares the cluster with the
other cluster tests without touching their objects. The CRDs are cluster-wide and shared: Helm
creates them from crds/ only when they are absent, and never deletes them; nothing here deletes
them either. The cluster has no node that runs the image, so the pods stay Pending: what is
checked is that the API server accepted every object, i.e. the ReplicaSet created its pods in a
namespace that enforces the ``restricted`` Pod Security profile.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.clusterfixture import ClusterHandle, KubeAPI, KubeAPIError, wait_for
from tests.helmtool import CHART, run_helm

pytestmark = pytest.mark.cluster

CRDS = [
    "ec2nodeclasses.karpenter.k8s.aws",
    "kwoknodeclasses.karpenter.kwok.sh",
    "nodeclaims.karpenter.sh",
    "nodeoverlays.karpenter.sh",
    "nodepools.karpenter.sh",
]
RBAC = "/apis/rbac.authorization.k8s.io/v1"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def gone(api: KubeAPI, path: str) -> bool:
    try:
        api.get(path)
    except KubeAPIError as e:
        if e.status == 404:
            return True
        raise
    return False


@pytest.fixture
def namespace(cluster: ClusterHandle) -> Iterator[str]:
    name = f"karpy-helm-{uuid.uuid4().hex[:8]}"
    cluster.api.create(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            },
        },
    )
    yield name
    with contextlib.suppress(KubeAPIError):
        cluster.api.delete(f"/api/v1/namespaces/{name}")
    # Unscheduled pods go at once; wait so no later test sees them Pending.
    wait_for(
        lambda: not cluster.api.get(f"/api/v1/namespaces/{name}/pods")["items"],
        timeout=30,
        what=f"pods of {name} gone",
    )


def helm(cluster: ClusterHandle, namespace: str, *args: str, check: bool = True) -> Any:
    return run_helm(
        [*args, "--namespace", namespace, "--kubeconfig", str(cluster.kubeconfig_path)],
        check=check,
        timeout=120,
    )


def env_of(deployment: dict[str, Any]) -> dict[str, str]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def pods_created(api: KubeAPI, namespace: str, release: str, count: int) -> list[Any] | None:
    pods = api.get(
        f"/api/v1/namespaces/{namespace}/pods",
        labelSelector=f"app.kubernetes.io/instance={release}",
    )["items"]
    return pods if len(pods) >= count else None


def failed_creates(api: KubeAPI, namespace: str) -> list[str]:
    events = api.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e["message"] for e in events if e.get("reason") == "FailedCreate"]


@pytest.mark.timeout(300)
def test_install_upgrade_uninstall(cluster: ClusterHandle, namespace: str) -> None:
    api = cluster.api
    release = namespace  # unique too; cluster-scoped objects are "<release>-py"
    ns_path = f"/apis/apps/v1/namespaces/{namespace}"

    # ---- install
    out = helm(
        cluster,
        namespace,
        "install", release, str(CHART),
        "--set", "settings.clusterName=helm-test",
        "--set", "settings.interruptionQueueName=helm-test-queue",
        "--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn="
        "arn:aws:iam::111122223333:role/helm-test",
    ).stdout  # fmt: skip
    assert "STATUS: deployed" in out

    for crd in CRDS:  # created by this install or by an earlier test: present either way
        api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    dep = api.get(f"{ns_path}/deployments/{release}")
    assert dep["spec"]["replicas"] == 2
    env = env_of(dep)
    assert (env["CLUSTER_NAME"], env["INTERRUPTION_QUEUE"]) == ("helm-test", "helm-test-queue")
    sa = api.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{release}")
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/helm-test",
        "meta.helm.sh/release-name": release,  # Helm's ownership marks
        "meta.helm.sh/release-namespace": namespace,
    }
    for path in (
        f"{RBAC}/clusterroles/{release}-py",
        f"{RBAC}/clusterrolebindings/{release}-py",
        f"{RBAC}/namespaces/{namespace}/roles/{release}-py",
        f"{RBAC}/namespaces/{namespace}/rolebindings/{release}-py",
        f"/api/v1/namespaces/{namespace}/services/{release}",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{release}",
    ):
        api.get(path)

    # The ReplicaSet's pods pass the restricted profile (a rejection is a FailedCreate event).
    pods = wait_for(
        lambda: pods_created(api, namespace, release, 2),
        timeout=60,
        what="the ReplicaSet to create 2 pods",
    )
    assert failed_creates(api, namespace) == []
    (rs,) = api.get(f"{ns_path}/replicasets")["items"]
    assert rs["spec"]["replicas"] == 2
    for pod in pods:
        assert pod["spec"]["securityContext"]["runAsUser"] == 65532
        assert pod["spec"]["containers"][0]["image"] == f"karpenter-py:{APP_VERSION}"

    # ---- upgrade: changed settings reach the Deployment's environment
    out = helm(
        cluster,
        namespace,
        "upgrade", release, str(CHART), "--reuse-values",
        "--set", "settings.batchMaxDuration=30s",
        "--set", "settings.featureGates.spotToSpotConsolidation=true",
        "--set", "logLevel=debug",
    ).stdout  # fmt: skip
    assert "REVISION: 2" in out
    env = env_of(api.get(f"{ns_path}/deployments/{release}"))
    assert env["BATCH_MAX_DURATION"] == "30s"
    assert env["LOG_LEVEL"] == "debug"
    assert "SpotToSpotConsolidation=true" in env["FEATURE_GATES"].split(",")
    assert env["CLUSTER_NAME"] == "helm-test"  # kept by --reuse-values
    wait_for(
        lambda: len(api.get(f"{ns_path}/replicasets")["items"]) == 2,
        timeout=60,
        what="the rollout's second ReplicaSet",
    )
    assert failed_creates(api, namespace) == []

    # ---- uninstall: nothing cluster-scoped is left but the CRDs
    helm(cluster, namespace, "uninstall", release, "--wait", "--timeout", "60s")
    for path in (f"{RBAC}/clusterroles/{release}-py", f"{RBAC}/clusterrolebindings/{release}-py"):
        assert gone(api, path), path
    for path in (
        f"{ns_path}/deployments/{release}",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{release}",
        f"/api/v1/namespaces/{namespace}/services/{release}",
        f"{RBAC}/namespaces/{namespace}/roles/{release}-py",
    ):
        assert gone(api, path), path
    for crd in CRDS:
        api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    releases = api.get(f"/api/v1/namespaces/{namespace}/secrets", labelSelector="owner=helm")[
        "items"
    ]
    assert releases == []


@pytest.mark.timeout(120)
def test_install_with_a_misspelt_value_creates_nothing(
    cluster: ClusterHandle, namespace: str
) -> None:
    release = namespace
    proc = helm(
        cluster,
        namespace,
        "install", release, str(CHART), "--set", "settings.clustername=oops",
        check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "at '/settings': additional properties 'clustername' not allowed" in proc.stderr
    assert gone(cluster.api, f"{RBAC}/clusterroles/{release}-py")
    assert (
        cluster.api.get(f"/api/v1/namespaces/{namespace}/secrets", labelSelector="owner=helm")[
            "items"
        ]
        == []
    )
